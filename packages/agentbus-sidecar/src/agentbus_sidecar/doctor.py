"""``agentbus doctor``: checks that say what is wrong and what to do about it.

Each check yields a Check(name, status, detail) with status ``ok``, ``warn`` or ``fail``:
credentials file (present, mode 0600, well formed), agent key and its expiry, registration, state.db
(integrity, WAL, schema version, size, stuck outbox rows), whether the sidecar loop runs, and the
gateway (reachable, the key not revoked there, clock skew, the delivery WebSocket upgrading).
Doctor never creates state.db and never prints a secret.
"""

from __future__ import annotations

import sqlite3
import stat
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentbus_sidecar.client import GatewayClient
from agentbus_sidecar.clock import format_ts, parse_ts, utcnow
from agentbus_sidecar.credentials import Credentials, load_credentials
from agentbus_sidecar.errors import ConfigError, GatewayError, GatewayUnreachable, SidecarError
from agentbus_sidecar.keys import fingerprint
from agentbus_sidecar.rotation import rotation_due
from agentbus_sidecar.store import open_store, state_db_path
from agentbus_sidecar.store.outbox import PARKED
from agentbus_sidecar.store.schema import LATEST
from agentbus_sidecar.sync import run_lock_held

__all__ = ["Check", "run_checks"]

SKEW_WARN_MS = 2000
# What the upgrade probe sends as its credential: the gateway upgrades before it reads the
# credential and closes this one with 4401, so the probe never replaces a running loop's socket
# (an agent's real credential would announce a new receiver).
PUSH_PROBE = "doctor-upgrade-probe"
STUCK_AFTER = timedelta(minutes=5)


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _credentials(path: Path) -> tuple[list[Check], Credentials | None]:
    checks: list[Check] = []
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        good = not mode & 0o077
        checks.append(
            Check(
                "credentials mode",
                "ok" if good else "fail",
                f"{path} is {mode:04o}" + ("" if good else f"; run chmod 600 {path}"),
            )
        )
    try:
        creds = load_credentials(path)
    except ConfigError as exc:
        checks.append(Check("credentials", "fail", str(exc)))
        return checks, None
    checks.append(Check("credentials", "ok", f"{creds.address} via {creds.gateway_url}"))
    try:
        key = creds.signing_key()
        checks.append(Check("agent key", "ok", f"Ed25519, fingerprint {fingerprint(key)}"))
    except ConfigError as exc:
        checks.append(Check("agent key", "fail", str(exc)))
    if creds.agent_id and creds.key_id:
        checks.append(Check("registration", "ok", f"{creds.agent_id}, key {creds.key_id}"))
        checks.append(_key_expiry(creds))
    else:
        checks.append(Check("registration", "fail", "not registered; run `agentbus register`"))
    if not creds.integration_token and not creds.agent_credential:
        checks.append(Check("token", "fail", "no integration token; run `agentbus login`"))
    return checks, creds


def _key_expiry(creds: Credentials) -> Check:
    if creds.key_expires_at is None:
        return Check("key expiry", "ok", "not stored yet; the sidecar loop asks the gateway")
    try:
        expires_at = parse_ts(creds.key_expires_at)
    except ValueError:
        return Check("key expiry", "warn", f"unreadable: {creds.key_expires_at!r}")
    left, when = expires_at - utcnow(), f"expires {creds.key_expires_at}"
    if left <= timedelta(0):
        advice = "run `agentbus keys rotate`, which offers a new key with the integration token"
        return Check("key expiry", "fail", f"the key expired at {creds.key_expires_at}; {advice}")
    if rotation_due(expires_at, utcnow()):
        advice = "`agentbus sidecar run` rotates it, or run `agentbus keys rotate`"
        return Check("key expiry", "warn", f"{when}, in {left.days} days; {advice}")
    return Check("key expiry", "ok", f"{when}, in {left.days} days")


def _store(path: Path) -> list[Check]:
    if not path.exists():
        return [Check("state.db", "warn", f"{path} does not exist yet (made on first use)")]
    try:
        conn = open_store(path)
    except (SidecarError, sqlite3.Error) as exc:
        return [Check("state.db", "fail", f"{path}: {exc}")]
    try:
        integrity = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        journal = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        stuck_before = format_ts(utcnow() - STUCK_AFTER)
        retrying = conn.execute(
            "SELECT count(*) FROM outbox WHERE attempts > 0 AND next_attempt_at < ? "
            "AND created_at < ?",
            (PARKED, stuck_before),
        ).fetchone()[0]
        parked = conn.execute(
            "SELECT count(*) FROM outbox WHERE next_attempt_at = ?", (PARKED,)
        ).fetchone()[0]
    finally:
        conn.close()
    ok = integrity == "ok" and journal.lower() == "wal" and version == LATEST
    checks = [
        Check(
            "state.db",
            "ok" if ok else "fail",
            f"{path}: integrity {integrity}, journal {journal}, schema {version}, {size} bytes",
        )
    ]
    checks.append(_loop(path))
    if parked:
        checks.append(
            Check("outbox failed", "warn", f"{parked} rows refused for good; see `agentbus outbox`")
        )
    if retrying:
        checks.append(
            Check(
                "outbox stuck",
                "warn",
                f"{retrying} rows still retrying after 5 min; is the sidecar running?",
            )
        )
    return checks


def _loop(state_db: Path) -> Check:
    """Whether a ``sidecar run`` holds the agent's lock: not running is no fault, but then
    messages arrive only when a command syncs."""
    if run_lock_held(state_db):
        return Check("sidecar loop", "ok", "running (it holds sidecar.lock)")
    advice = "messages arrive when a command syncs; `agentbus sidecar run` keeps them coming"
    return Check("sidecar loop", "ok", f"not running: {advice}")


async def _key_at_gateway(client: GatewayClient, creds: Credentials) -> Check | None:
    """Whether the gateway still takes the key (revoked after a leak?), asked with the
    integration token: a credential could not be had with a revoked key."""
    if not (creds.integration_token and creds.agent_id and creds.key_id):
        return None
    try:
        keys = await client.list_keys(creds.integration_token, creds.agent_id)
    except (GatewayError, GatewayUnreachable) as exc:
        return Check("key at gateway", "warn", f"could not list the agent's keys: {exc}")
    mine = next((k for k in keys if k.get("id") == creds.key_id), None)
    if mine is None:
        return Check("key at gateway", "fail", f"the gateway does not know {creds.key_id}")
    if mine.get("revoked_at"):
        advice = "run `agentbus keys rotate` (the integration token vouches for the new key)"
        return Check("key at gateway", "fail", f"revoked at {mine['revoked_at']}; {advice}")
    return Check("key at gateway", "ok", f"{creds.key_id} is usable")


async def _gateway(creds: Credentials) -> list[Check]:
    url = creds.gateway_url
    offsets: list[int] = []
    client = GatewayClient(url, on_clock_offset=offsets.append)
    try:
        response = await client.healthz()
        key = await _key_at_gateway(client, creds)
    except GatewayUnreachable as exc:
        return [Check("gateway", "fail", str(exc))]
    except GatewayError as exc:
        return [Check("gateway", "fail", f"{url}/healthz answered {exc}")]
    finally:
        await client.aclose()
    checks = [Check("gateway", "ok", f"{url}/healthz answered {response.status_code}")]
    if key is not None:
        checks.append(key)
    if offsets:
        skew = offsets[-1]
        status = "ok" if abs(skew) <= SKEW_WARN_MS else "warn"
        advice = "" if status == "ok" else "; ids and key proofs are corrected, but fix NTP"
        checks.append(
            Check(
                "clock skew",
                status,
                f"gateway clock - local clock = {skew} ms, to within 500 ms (the Date header "
                f"has whole seconds){advice}",
            )
        )
    else:
        checks.append(Check("clock skew", "warn", "the gateway sent no Date header"))
    return checks


async def _push(gateway_url: str) -> Check:
    """Whether the delivery WebSocket's upgrade reaches the gateway (a proxy may not pass it)."""
    # Imported here, as by the loop: other commands do not load the WebSocket client.
    from agentbus_sidecar.push import PushUnavailable, open_socket

    name = "delivery WebSocket"
    try:
        ws = await open_socket(gateway_url, PUSH_PROBE)
    except PushUnavailable as exc:
        advice = "`sidecar run` long-polls instead; does a proxy drop WebSocket upgrades?"
        return Check(name, "warn", f"the upgrade was answered {exc}: {advice}")
    except GatewayUnreachable as exc:
        return Check(name, "warn", f"could not be opened: {exc.reason}")
    await ws.close()
    return Check(name, "ok", "the gateway upgrades; `sidecar run` has messages pushed")


async def run_checks(creds_path: Path, state_dir: Path | None = None) -> list[Check]:
    checks, creds = _credentials(creds_path)
    if creds is None:
        return checks
    if creds.agent_id:
        checks += _store(state_db_path(creds.agent_id, state_dir))
    gateway = await _gateway(creds)
    checks += gateway
    if gateway[0].status == "ok":
        checks.append(await _push(creds.gateway_url))
    return checks
