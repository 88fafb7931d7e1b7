"""Quiet Elastic Agents and the fold of a check-in: which agents a check-in may answer without a
round (a notice about them, their range or their tenant ends it; a round that overlapped a
notice does not start it), and the columns and transitions one check-in report produces, the
same whether a round or the batcher folds it."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st
from strataplane.agents.elastic_quiet import QuietAgents
from strataplane.agents.elastic_report import CheckinReport, fold_checkin
from strataplane.store.fleet_elastic import Action, Component
from strataplane.store.fleet_reports import ReportRow

T, OTHER = UUID(int=1), UUID(int=2)
A, B, C = UUID(int=10), UUID(int=20), UUID(int=30)
OLD, NEW = b"\x01" * 32, b"\x02" * 32
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_round_marks_an_agent_quiet_until_a_notice_concerns_it() -> None:
    quiet = QuietAgents()
    for agent in (A, B, C):
        quiet.mark(T, agent, NEW, quiet.epoch)
    assert quiet.is_quiet(T, A, NEW)
    assert not quiet.is_quiet(T, A, OLD)  # another desired artifact: a round
    assert not quiet.is_quiet(OTHER, A, NEW)
    quiet.agent_changed(OTHER, A)  # another tenant's notice
    assert quiet.is_quiet(T, A, NEW)
    quiet.agent_changed(T, A)
    assert not quiet.is_quiet(T, A, NEW)
    quiet.range_changed(T, A, B)
    assert not quiet.is_quiet(T, B, NEW)
    assert quiet.is_quiet(T, C, NEW)
    quiet.tenant_changed(T)
    assert not quiet.is_quiet(T, C, NEW)


def test_a_round_that_overlapped_a_notice_leaves_the_agent_as_it_was() -> None:
    quiet = QuietAgents()
    began = quiet.epoch
    quiet.range_changed(T, B, C)  # about other agents, but the round cannot tell
    quiet.mark(T, A, NEW, began)
    assert not quiet.is_quiet(T, A, NEW)
    quiet.mark(T, A, NEW, quiet.epoch)
    assert quiet.is_quiet(T, A, NEW)
    quiet.forget(A)  # its round delivered an action
    assert not quiet.is_quiet(T, A, NEW)
    quiet.mark(T, A, NEW, quiet.epoch)
    quiet.clear()
    assert not quiet.is_quiet(T, A, NEW)


def _row(**kw: object) -> ReportRow:
    base: dict[str, object] = {
        "id": A,
        "health": "healthy",
        "sync": "updating",
        "sync_reason": None,
        "version": "8.15.0",
        "desired_artifact": NEW,
        "desired_revision_id": 7,
        "served_artifact": NEW,
        "applied_artifact": OLD,
        "applied_revision_id": 6,
    }
    return ReportRow(**{**base, **kw})  # type: ignore[arg-type]


def _policy(artifact: bytes, seq: int, *, acked: bool, delivered: bool = True) -> Action:
    return Action(
        UUID(int=seq),
        "POLICY_CHANGE",
        {},
        artifact,
        seq,
        NOW,
        NOW if delivered else None,
        NOW if acked else None,
        None,
        None,
    )


def _report(
    status: str = "online", message: str | None = None, idx: int | None = None
) -> CheckinReport:
    units = [Component("system-default", "", None, "HEALTHY", None, None)]
    return CheckinReport(
        A, NOW, status, message, idx, units, "8.15.0", "8.15.0", {"status": status}
    )


def test_an_acknowledged_revision_proves_the_desired_policy() -> None:
    latest = _policy(NEW, 2, acked=True)
    update, events, failed = fold_checkin(_row(), latest, latest, _report(idx=2))
    assert (update.applied_artifact, update.applied_revision_id) == (NEW, 7)
    assert (update.sync, update.health, update.applied_changed) == ("in_sync", "healthy", True)
    assert failed is None
    assert (A, "sync", "updating", "in_sync") in events
    assert (A, "applied", OLD.hex(), NEW.hex()) in events


def test_a_revision_not_acknowledged_proves_nothing() -> None:
    latest = _policy(NEW, 2, acked=False)
    update, events, _failed = fold_checkin(_row(), latest, latest, _report(idx=2))
    assert update.applied_artifact == OLD
    assert update.sync == "updating"
    assert events == []


def test_a_degraded_check_in_after_delivery_is_a_failed_reload() -> None:
    latest = _policy(NEW, 2, acked=True)
    update, _events, failed = fold_checkin(
        _row(), latest, None, _report("degraded", "input failed", idx=1)
    )
    assert (update.sync, update.sync_reason, update.health) == (
        "out_of_sync",
        "reload_failed",
        "degraded",
    )
    assert failed == latest.id


@given(
    st.sampled_from(["online", "degraded", "error"]),
    st.sampled_from(["in_sync", "updating", "render_error"]),
)
def test_an_agent_running_its_desired_policy_is_in_sync_unless_the_render_failed(
    status: str, sync: str
) -> None:
    row = _row(sync=sync, applied_artifact=NEW, applied_revision_id=5)
    update, _events, failed = fold_checkin(
        row, _policy(NEW, 2, acked=True), None, _report(status, "m")
    )
    assert update.sync == ("render_error" if sync == "render_error" else "in_sync")
    assert update.applied_revision_id == 7  # the desired revision renders the applied bytes
    assert failed is None
