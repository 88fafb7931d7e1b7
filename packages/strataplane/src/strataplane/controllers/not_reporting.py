"""Time-based transitions of agent_instance (schema: agent_health, agent_sync), per tenant:

- health ``not_reporting``: nothing received for 3 expected report intervals (Telegraf:
  Settings ``telegraf.heartbeat.interval`` at the release pointer, default 1m; Vector:
  ``vector.heartbeat.interval``; Elastic Agent: ``elastic-agent.pollTimeout``, default 5m, or
  the longest the server holds a check-in, ``STRATAPLANE_FLEET_ELASTIC_POLL``, when that is
  longer: a held check-in is not seen again until it ends), counted from
  the later of ``last_seen_at`` and the ``resumed_at`` of the tenant's controller shard, so an
  outage of every replica does not make every agent look silent. Agents that never reported
  stay ``pending``. The next heartbeat sets health from its report again.
- sync ``out_of_sync`` / ``reload_failed`` (heartbeat kinds): the desired artifact was served
  and is still not applied 3 intervals later (Telegraf exits when a reload fails); an Elastic
  Agent reports a failed policy in its own check-in instead (agents/elastic.py).
- sync ``out_of_sync`` / ``watcher_stalled``: a new desired artifact has not been fetched for 3
  intervals while the agent keeps reporting: its config-URL watcher stopped polling.

Find and act are one statement each. The rows found are locked in id order, as every bulk
writer of agent_instance locks them (so none of them deadlock), skipping rows another
transaction holds: those are being written by a batch of reports, so their agent is not
silent, and the next pass sees them again. Locking re-checks every condition on the current
row, so running a pass twice or on two replicas changes nothing more. Transitions are recorded
in agent_status_event.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from platformkit.db.scope import Conn

from strataplane.domain.spec.fields import parse_duration
from strataplane.render.service import RENDERER
from strataplane.store import fleet_spec

MISSED = 3
KINDS = ("telegraf", "vector", "elastic-agent")
# the kinds whose reports are heartbeats; an Elastic Agent's check-in reports a failed apply
HEARTBEAT_KINDS = ("telegraf", "vector")
_REPORTS = {"elastic-agent": "check-in"}
_DEFAULT_MS = 60_000

_HEALTH = """
WITH old AS (
    SELECT id, health::text AS health FROM agent_instance
    WHERE tenant_id = %(t)s AND kind = %(kind)s::agent_kind
    AND health NOT IN ('pending', 'not_reporting')
    AND greatest(last_seen_at, %(resumed)s) < now() - %(silence)s * interval '1 millisecond'
    ORDER BY id FOR NO KEY UPDATE SKIP LOCKED
), upd AS (
    UPDATE agent_instance a SET health = 'not_reporting',
        health_message = 'no report for ' || %(missed)s || ' ' || %(report)s || ' intervals'
    FROM old WHERE a.tenant_id = %(t)s AND a.id = old.id
    RETURNING a.id
)
INSERT INTO agent_status_event (tenant_id, agent_instance_id, field, from_value, to_value)
SELECT %(t)s, upd.id, 'health', old.health, 'not_reporting' FROM upd JOIN old ON old.id = upd.id
"""

_SYNC = """
WITH due AS (
    SELECT id, CASE WHEN served_artifact = desired_artifact THEN 'reload_failed'
                    ELSE 'watcher_stalled' END AS reason
    FROM agent_instance
    WHERE tenant_id = %(t)s AND kind = %(kind)s::agent_kind AND sync = 'updating'
    AND desired_artifact IS NOT NULL AND applied_artifact IS DISTINCT FROM desired_artifact
    AND (
        (served_artifact = desired_artifact
         AND served_at < now() - %(grace)s * interval '1 millisecond')
        OR (served_artifact IS DISTINCT FROM desired_artifact AND served_artifact IS NOT NULL
            AND desired_since < now() - %(grace)s * interval '1 millisecond'
            AND greatest(last_seen_at, %(resumed)s)
                > now() - %(grace)s * interval '1 millisecond')
    )
    ORDER BY id FOR NO KEY UPDATE SKIP LOCKED
), upd AS (
    UPDATE agent_instance a SET sync = 'out_of_sync', sync_reason = due.reason
    FROM due WHERE a.tenant_id = %(t)s AND a.id = due.id
    RETURNING a.id, a.sync_reason
)
INSERT INTO agent_status_event (tenant_id, agent_instance_id, field, from_value, to_value, detail)
SELECT %(t)s, id, 'sync', 'updating', 'out_of_sync', jsonb_build_object('reason', sync_reason)
FROM upd
"""


async def report_interval_ms(conn: Conn, tenant_id: UUID, kind: str = "telegraf") -> int:
    """The report interval of ``kind`` at its release pointer."""
    revision = await fleet_spec.release_revision(conn, tenant_id, kind)
    if revision is None:
        return _DEFAULT_MS
    tree = await RENDERER.tree(conn, tenant_id, revision)
    return parse_duration(tree.report_interval(kind)) or _DEFAULT_MS


async def run(conn: Conn, tenant_id: UUID, resumed_at: datetime, held_ms: int) -> None:
    """One pass over the tenant's agents of every served kind, in the caller's tenant
    transaction; ``held_ms`` is the longest an Elastic Agent check-in is held."""
    for kind in KINDS:
        interval = await report_interval_ms(conn, tenant_id, kind)
        if kind == "elastic-agent":
            interval = max(interval, held_ms)
        params = {
            "t": tenant_id,
            "kind": kind,
            "resumed": resumed_at,
            "silence": MISSED * interval,
            "grace": MISSED * interval,
            "missed": MISSED,
            "report": _REPORTS.get(kind, "heartbeat"),
        }
        await conn.execute(_HEALTH, params)
        if kind in HEARTBEAT_KINDS:
            await conn.execute(_SYNC, params)
