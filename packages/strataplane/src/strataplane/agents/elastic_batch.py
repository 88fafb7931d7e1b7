"""Quiet Elastic Agent check-ins written in batches (agents/batch.py calls ``write_checkins``
in its per-tenant transaction, the agents' rows locked): a few statements per batch however
many agents checked in. Each report is folded against the row as it is now
(agents/elastic_report.py), as its round would have folded it; a report older than the
agent's last check-in recorded (a round, or another replica's batch) is skipped, so an older
report never overwrites a newer one."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.agents.elastic_report import CheckinReport, fold_checkin
from strataplane.store import fleet_elastic, fleet_reports

__all__ = ["write_checkins"]


async def write_checkins(conn: Conn, tenant_id: UUID, reports: Sequence[CheckinReport]) -> None:
    if not reports:
        return
    ids = [r.agent_id for r in reports]
    rows = await fleet_elastic.checkin_rows(conn, tenant_id, ids)
    current = [
        r
        for r in reports
        if (row := rows.get(r.agent_id)) is not None  # forgotten meanwhile
        and (row.last_seen_at is None or row.last_seen_at <= r.at)
    ]
    if not current:
        return
    latest = await fleet_elastic.latest_policies(conn, tenant_id, [r.agent_id for r in current])
    proven = await fleet_elastic.policies_at(
        conn,
        tenant_id,
        [(r.agent_id, r.revision_idx) for r in current if r.revision_idx is not None],
    )
    updates, events = [], []
    for report in current:
        update, transitions, failed = fold_checkin(
            rows[report.agent_id],
            latest.get(report.agent_id),
            proven.get(report.agent_id),
            report,
        )
        updates.append(update)
        events += transitions
        if failed is not None and report.message is not None:
            await fleet_elastic.policy_failed(
                conn, tenant_id, report.agent_id, failed, report.message
            )
    await fleet_elastic.put_components(conn, tenant_id, {r.agent_id: r.components for r in current})
    await fleet_reports.write_reports(conn, tenant_id, updates)
    await fleet_reports.insert_events(conn, tenant_id, events)
