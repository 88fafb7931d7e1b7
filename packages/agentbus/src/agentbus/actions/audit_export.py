"""Verifying an exported chain away from the platform: the JSON Lines of ``/v1/audit/export``
and the public keys of ``/.well-known/jwks.json`` are all it takes.

Each line is checked as the live verification checks a row (seq, link, hash, then a
checkpoint's signature or an audit action's digest against the ``action`` the line carries);
the report names the first bad line's seq and the checkpoint it breaks. A tenant who keeps its
exports and the public checkpoints can so show that a later export rewrote history.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from platformkit.audit import GENESIS, verify_chain

from agentbus.actions.audit_chain import ChainReport, row_problem
from agentbus.ids import parse_id
from agentbus.store.audit_chain import hashed_event

TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class _Link:
    seq: int
    event: dict[str, Any]
    prev_hash: bytes
    hash: bytes


def jwks_keys(document: dict[str, Any]) -> dict[str, Ed25519PublicKey]:
    """The Ed25519 keys of a JWKS document, by kid."""
    keys = {}
    for jwk in document.get("keys", []):
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            raw = base64.urlsafe_b64decode(jwk["x"] + "=" * (-len(jwk["x"]) % 4))
            keys[str(jwk["kid"])] = Ed25519PublicKey.from_public_bytes(raw)
    return keys


def _when(text: str) -> datetime:
    return datetime.strptime(text, TS_FORMAT).replace(tzinfo=UTC)


def _row(line: dict[str, Any]) -> dict[str, Any]:
    signature, digest = line.get("signature"), line.get("event_digest")
    return {
        "tenant_id": parse_id("ten", line["tenant_id"]),
        "seq": int(line["seq"]),
        "at": _when(line["at"]),
        "event_id": uuid.UUID(line["event_id"]),
        "event_kind": line["event_kind"],
        "actor": line["actor"],
        "summary": line["summary"],
        "prev_hash": bytes.fromhex(line["prev_hash"]),
        "row_hash": bytes.fromhex(line["row_hash"]),
        "signature": None if signature is None
        else base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),
        "event_digest": None if digest is None else bytes.fromhex(digest),
        "signing_kid": line.get("signing_kid"),
    }  # fmt: skip


def _action(line: dict[str, Any]) -> dict[str, Any] | None:
    action = line.get("action")
    return None if action is None else {**action, "at": _when(action["at"])}


def verify_export(lines: Iterable[str], keys: dict[str, Ed25519PublicKey]) -> ChainReport:
    """Walk exported lines (from seq 1) and report the first bad one."""
    parsed = [json.loads(text) for text in lines if text.strip()]
    rows = [_row(line) for line in parsed]
    tenant = parsed[0]["tenant_id"] if parsed else ""
    report = ChainReport(tenant, True, 0, rows[-1]["seq"] if rows else 0)
    links = [_Link(r["seq"], hashed_event(r), r["prev_hash"], r["row_hash"]) for r in rows]
    walked = verify_chain(links, start_prev=GENESIS, start_seq=1)
    good = len(rows) if walked.ok else walked.checked
    bad: tuple[int, str, str] | None = None
    for i in range(good):
        problem = row_problem(rows[i], keys, _action(parsed[i]))
        if problem is not None:
            bad = (i, *problem)
            break
        if rows[i]["event_kind"] == "checkpoint":
            report.checkpoints_verified += 1
            report.last_good_checkpoint = rows[i]["seq"]
    if bad is None and not walked.ok:
        bad = (walked.checked, str(walked.reason), walked.detail)
    if bad is None:
        report.checked = len(rows)
        return report
    index, reason, detail = bad
    report.ok, report.first_bad_seq, report.reason, report.detail = False, index + 1, reason, detail
    report.checked = index
    later = [r for r in rows[index:] if r["event_kind"] == "checkpoint"]
    if later:
        report.broken_checkpoint = {"seq": later[0]["seq"], "signing_kid": later[0]["signing_kid"],
                                    "at": later[0]["at"].strftime(TS_FORMAT)}  # fmt: skip
    return report
