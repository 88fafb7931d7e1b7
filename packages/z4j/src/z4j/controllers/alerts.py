"""Evaluates alert rules and delivers their notices, on one replica per database.

Every ``alert_interval_seconds`` the leader (``platformkit.jobs.LeaderLoop``) measures each
enabled rule's value in its project's scope and opens or resolves its firing
(``z4j.domain.alerts.decide``); a disabled or deleted rule's open firing resolves. Then it
delivers what firings owe: the start of each, then its end, to the rule's webhook (a JSON
POST) and to each email address, each channel once (``z4j.domain.alerts.owed``). A channel
that fails is retried on the next rounds, up to ``MAX_ATTEMPTS`` rounds that failed somewhere,
and the error is kept on the firing for the dashboard; the other channels are not held up.

Webhooks go to public addresses only, unless ``alert_webhooks_private`` is set: the host is
resolved first and every address it has must be public (platformkit.http.egress); redirects are
not followed.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from platformkit.http.egress import egress_problem, networks
from platformkit.jobs import LeaderLoop, LockKey, shard_keys
from platformkit.mail import Mail, MailError

from z4j import __version__
from z4j.brain import Brain
from z4j.domain.alerts import (
    Notice,
    Phase,
    RuleSpec,
    Step,
    decide,
    owed,
)
from z4j.store import alerts as store

log = logging.getLogger("z4j.alerts")
LOOP_NAME = "z4j.alerts"


class DeliveryFailed(Exception):
    """A notice did not reach a channel; the message says why, without secrets."""


async def evaluate_once(brain: Brain, now: datetime | None = None) -> None:
    """Open and resolve firings for every rule, then deliver what is owed."""
    now = now or datetime.now(UTC)
    async with brain.platform_tx() as conn:
        rules = await store.enabled_rules(conn)
    for row in rules:
        spec = RuleSpec.of_row(row)
        project_id: uuid.UUID = row["project_id"]
        open_id: uuid.UUID | None = row["open_id"]
        async with brain.project_tx(project_id) as conn:
            value = await store.measure(conn, project_id, spec, now) if spec.enabled else None
            step = decide(open_id is not None, value, spec.threshold)
            if step is Step.FIRE and value is not None:
                if await store.open_firing(conn, row["id"], project_id, value, now):
                    log.info("alert %r of project %s fires at %s", spec.name, project_id, value)
            elif step is Step.RESOLVE and open_id is not None:
                await store.resolve_firing(conn, open_id, value, now)
                log.info("alert %r of project %s resolved", spec.name, project_id)
            elif open_id is not None:
                await store.note_value(conn, open_id, value)
    await deliver_owed(brain, now)


async def deliver_owed(brain: Brain, now: datetime) -> None:
    async with brain.platform_tx() as conn:
        rows = await store.owing(conn)
    for row in rows:
        spec = RuleSpec.of_row(row)
        notices: dict[str, Any] = {k: dict(v) for k, v in (row["notices"] or {}).items()}
        resolved = row["resolved_at"] is not None
        failed: str | None = None
        for channel, phases in owed(resolved, notices, spec, row["attempts"]).items():
            for phase in phases:
                try:
                    await _send(brain, channel, _notice(brain, row, spec, phase))
                except DeliveryFailed as exc:
                    failed = f"{channel}: {exc}"
                    log.warning("alert %r notice (%s) to %s failed: %s", spec.name, phase,
                                channel, exc)  # fmt: skip
                    break  # this channel's end waits until its start is delivered
                notices.setdefault(phase.value, {})[channel] = now.isoformat()
        spent = row["attempts"] + (1 if failed else 0)
        still = bool(owed(resolved, notices, spec, spent))
        async with brain.project_tx(row["project_id"]) as conn:
            await store.record_delivery(conn, row["id"], notices, failed, still)


def _notice(brain: Brain, row: dict[str, Any], spec: RuleSpec, phase: Phase) -> Notice:
    project_id = str(row["project_id"])
    return Notice(
        phase=phase,
        rule_id=str(row["rule_id"]),
        firing_id=str(row["id"]),
        project_id=project_id,
        project_name=row["project_name"],
        rule=spec,
        value=row["value"] if phase is Phase.FIRING else row["last_value"],
        started_at=row["started_at"],
        resolved_at=row["resolved_at"] if phase is Phase.RESOLVED else None,
        link=f"{brain.settings.base_url}/projects/{project_id}/alerts",
    )


async def _send(brain: Brain, channel: str, notice: Notice) -> None:
    if channel == "webhook":
        assert notice.rule.webhook_url is not None
        await post_webhook(brain, notice.rule.webhook_url, notice)
        return
    address = channel.removeprefix("email:")
    try:
        await brain.mailer.send(Mail(address, notice.subject, notice.text))
    except MailError as exc:
        raise DeliveryFailed(str(exc)) from None


_EVERYWHERE = networks(["0.0.0.0/0", "::/0"])  # alert_webhooks_private: any address


async def post_webhook(brain: Brain, url: str, notice: Notice) -> None:
    host = urlsplit(url).hostname or ""
    allow = _EVERYWHERE if brain.settings.alert_webhooks_private else ()
    problem = await egress_problem(url, allow)
    if problem is not None:
        raise DeliveryFailed(f"the host {host}: {problem}")
    headers = {
        "User-Agent": f"z4j/{__version__}",
        "X-Z4J-Event": f"alert.{notice.phase.value}",
        "Idempotency-Key": f"{notice.firing_id}:{notice.phase.value}",
    }
    timeout = brain.settings.alert_webhook_timeout_seconds
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as http:
            answer = await http.post(url, json=notice.payload(), headers=headers)
    except httpx.HTTPError as exc:
        raise DeliveryFailed(f"{type(exc).__name__} reaching {host}") from None
    if not 200 <= answer.status_code < 300:
        raise DeliveryFailed(f"{host} answered HTTP {answer.status_code}")


def alerts_loop(brain: Brain, conninfo: str) -> LeaderLoop:
    """The evaluation on one replica per database, every ``alert_interval_seconds``."""

    async def body(_key: LockKey) -> None:
        try:
            await evaluate_once(brain)
        except Exception:
            log.exception("alert evaluation failed")

    return LeaderLoop(
        conninfo, shard_keys(LOOP_NAME, 1), brain.settings.alert_interval_seconds, body
    )
