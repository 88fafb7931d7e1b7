"""One agent connection speaking wire protocol v2, independent of the transport.

The WebSocket route and the HTTP fallback both drive an ``AgentSession``: authenticate the
bearer token, answer ``hello`` with ``hello_ack``, then verify every signed frame (signature,
clock skew, nonce memory, sequence, session binding) before acting on it.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from platformkit import fastjson
from platformkit.db.scope import Conn
from platformkit.ids import uuid7
from platformkit.tokens import InvalidTokenError, parse_token
from z4j_agent.protocol import (
    CLOSE_BAD_HELLO,
    CLOSE_BAD_TOKEN,
    CLOSE_UNSUPPORTED_PROTOCOL,
    MAX_BATCH_EVENTS,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    FrameError,
    FrameSigner,
    FrameVerifier,
    Session,
)

from z4j import __version__
from z4j.brain import AGENT_TOKEN, Brain
from z4j.controllers.commands import command_frame_payload
from z4j.ingest import command_frames
from z4j.ingest.batch import MAX_REFUSALS_LISTED, ingest_batch
from z4j.ingest.frames import FrameRefused
from z4j.store import agents as agent_store
from z4j.store import lost as lost_store
from z4j.store import workers as worker_store

log = logging.getLogger("z4j.agent")


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


async def authenticate(brain: Brain, header: str | None) -> dict[str, Any]:
    """The agent row for a bearer token, or FrameError(4401)."""
    token = bearer_token(header)
    try:
        parse_token(AGENT_TOKEN, token or "")
    except InvalidTokenError:
        raise FrameError("missing or malformed agent token", CLOSE_BAD_TOKEN) from None
    assert token is not None
    async with brain.platform_tx() as conn:
        agent = await agent_store.find_by_token_hash(conn, brain.token_hasher.hash(token))
    if agent is None:
        raise FrameError("unknown agent token", CLOSE_BAD_TOKEN)
    return agent


class AgentSession:
    """Protocol state of one authenticated connection."""

    def __init__(self, brain: Brain, agent: dict[str, Any], session_id: str | None = None) -> None:
        self.brain = brain
        self.agent_id: uuid.UUID = agent["id"]
        self.project_id: uuid.UUID = agent["project_id"]
        # A fresh id per connection; the long-poll dialect binds the agent's session nonce.
        self.session_id = session_id or str(uuid7())
        self.worker_id = ""
        session = Session(
            brain.secrets.project_secret(self.project_id),
            str(self.agent_id),
            str(self.project_id),
            self.session_id,
        )
        self.signer = FrameSigner(session)
        self.verifier = FrameVerifier(session, faster=fastjson.canonical_candidate)
        self.greeted = False

    async def hello(self, frame: Any) -> dict[str, Any]:
        if not isinstance(frame, dict) or frame.get("type") != "hello":
            raise FrameError("the first frame must be hello", CLOSE_BAD_HELLO)
        payload = frame.get("payload")
        if frame.get("v") != PROTOCOL_VERSION or not isinstance(payload, dict):
            raise FrameError("unsupported protocol version", CLOSE_UNSUPPORTED_PROTOCOL)
        if str(payload.get("protocol_version", "2")).split(".")[0] != str(PROTOCOL_VERSION):
            raise FrameError("unsupported protocol version", CLOSE_UNSUPPORTED_PROTOCOL)
        self.worker_id = str(payload.get("worker_id") or "")[:128]
        now = datetime.now(UTC)
        async with self.brain.project_tx(self.project_id) as conn:
            await agent_store.record_hello(conn, self.agent_id, payload, now)
            await self._worker_seen(conn, payload, now)
        self.greeted = True
        await self.brain.notify_change()
        return {
            "v": PROTOCOL_VERSION,
            "type": "hello_ack",
            "id": str(frame.get("id", ""))[:64],
            "ts": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "payload": {
                "protocol_version": str(PROTOCOL_VERSION),
                "brain_version": __version__,
                "agent_id": str(self.agent_id),
                "project_id": str(self.project_id),
                "session_id": self.session_id,
                "heartbeat_interval_seconds": self.brain.settings.heartbeat_interval_seconds,
                "max_frame_size_bytes": MAX_FRAME_BYTES,
            },
        }

    async def handle(self, frame: Any, suspect: bool = True) -> dict[str, Any] | None:
        """Verify and act on one signed frame; return the reply frame, if any.

        ``suspect`` is the parse's verdict that the frame may hold values PostgreSQL cannot
        store (``z4j.ingest.frames.parse_frame``); without one, it is assumed."""
        frame = await self.verified(frame)
        kind = frame["type"]
        payload = frame["payload"]
        if kind == "event_batch":
            return await self._event_batch(frame["id"], payload, suspect)
        if kind == "heartbeat":
            now = datetime.now(UTC)
            async with self.brain.project_tx(self.project_id) as conn:
                await agent_store.touch(conn, self.agent_id, now)
                restored = await self._worker_seen(conn, payload, now)
            if restored:
                await self.brain.notify_change()
            return None
        if kind == "command_ack":
            await command_frames.record_ack(self.brain, self.project_id, self.agent_id, frame)
        elif kind == "command_result":
            await command_frames.record_result(self.brain, self.project_id, self.agent_id, frame)
        # agent_status, registry_delta and error are accepted after verifying them.
        return None

    async def _worker_seen(self, conn: Conn, payload: dict[str, Any], now: datetime) -> int:
        """Record this worker's contact; lost tasks it reports running go back to started."""
        if not self.worker_id:
            return 0
        active = worker_store.active_ids(payload)
        await worker_store.seen(conn, self.project_id, self.agent_id, self.worker_id, now, active)
        if not active:
            return 0
        return await lost_store.restore_active(
            conn, self.project_id, self.agent_id, self.worker_id, active
        )

    async def verified(self, frame: Any) -> dict[str, Any]:
        """The frame, once authentic and new to this session (its replay memory here)."""
        return self.verifier.verify(frame)

    async def signer_for(self, count: int) -> FrameSigner:
        """A signer good for the next ``count`` frames of this session."""
        return self.signer

    async def command_frames(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The signed ``command`` frames of claimed commands: each frame id is the command id,
        which the agents' ack and result name."""
        signer = await self.signer_for(len(rows))
        return [
            signer.sign("command", command_frame_payload(row), frame_id=str(row["id"]))
            for row in rows
        ]

    async def _event_batch(
        self, frame_id: str, payload: dict[str, Any], suspect: bool
    ) -> dict[str, Any]:
        events = payload.get("events")
        if not isinstance(events, list) or len(events) > MAX_BATCH_EVENTS:
            raise FrameError(
                f"event_batch needs an events list of <= {MAX_BATCH_EVENTS}", CLOSE_BAD_HELLO
            )
        outcome = await ingest_batch(
            self.brain,
            self.project_id,
            self.agent_id,
            events,
            suspect=suspect,
            worker_id=self.worker_id,
        )
        ack: dict[str, Any] = {
            "acked_id": frame_id,
            "received": outcome.received,
            "accepted": outcome.accepted,
            "rejected": len(outcome.refused),
        }
        if outcome.refused:
            ack["refused"] = [
                {"index": r.index, "id": r.event_id, "reason": r.reason}
                for r in outcome.refused[:MAX_REFUSALS_LISTED]
            ]
        if outcome.repaired:
            ack["repaired"] = outcome.repaired
        return (await self.signer_for(1)).sign("event_batch_ack", ack)

    def note_refused(self, refused: FrameRefused) -> None:
        log.warning(
            "agent %s: frame %s (%s) refused: %s",
            self.agent_id,
            refused.frame_id,
            refused.frame_type,
            refused.reason,
        )

    async def refused_frame(self, refused: FrameRefused) -> dict[str, Any]:
        """The answer to a frame that could not be parsed, so the agent never sends it again.

        An ``event_batch`` whose id can be read is acked with all of it refused (the agent
        deletes it from its buffer); anything else gets an ``error`` frame naming it."""
        self.note_refused(refused)
        signer = await self.signer_for(1)
        if refused.frame_type == "event_batch" and refused.frame_id is not None:
            return signer.sign(
                "event_batch_ack",
                {
                    "acked_id": refused.frame_id,
                    "received": 0,
                    "accepted": 0,
                    "rejected": 0,
                    "refused_frame": refused.reason,
                },
            )
        return signer.sign(
            "error",
            {
                "code": "frame_refused",
                "message": refused.reason,
                "fatal": False,
                "frame_id": refused.frame_id,
            },
        )

    async def disconnected(self) -> None:
        if not self.greeted:
            return
        if self.worker_id:
            async with self.brain.project_tx(self.project_id) as conn:
                await worker_store.disconnected(
                    conn, self.agent_id, self.worker_id, datetime.now(UTC)
                )
        others = [k for k in self.brain.live if k[0] == self.agent_id]
        if not others:
            async with self.brain.project_tx(self.project_id) as conn:
                await agent_store.mark_offline(conn, self.agent_id)
            await self.brain.notify_change()
