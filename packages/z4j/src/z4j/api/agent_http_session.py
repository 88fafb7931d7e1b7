"""Long-poll sessions that any brain replica can serve (docs/decisions/0041).

A ``SharedSession`` is an ``AgentSession`` whose replay state lives in PostgreSQL
(``z4j.store.http_sessions``) instead of the process: the frame's signature and clock skew are
checked here, its seq and nonce by one statement on the session's row, and every frame the
brain signs takes its seq from the same row. So consecutive requests of one agent may land on
different replicas, and the agent still sees one strictly increasing sequence per session.
"""

from __future__ import annotations

import hmac
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from z4j_agent.protocol import (
    CLOSE_BAD_SIGNATURE,
    CLOSE_BAD_TOKEN,
    CLOSE_REPLACED,
    FrameError,
    FrameSigner,
)

from z4j.api.agent_session import AgentSession
from z4j.brain import Brain
from z4j.store import agents as agent_store
from z4j.store import http_sessions as session_store

MAX_SEQ = 2**63 - 1  # a bigint column; the protocol sets no bound
MAX_SESSION_ID = 64


class SharedSession(AgentSession):
    async def verified(self, frame: Any) -> dict[str, Any]:
        checked = self.verifier.authentic(frame)
        seq = checked["seq"]
        if isinstance(seq, bool) or not 0 < seq <= MAX_SEQ:
            raise FrameError("bad seq", CLOSE_BAD_SIGNATURE)
        async with self.brain.project_tx(self.project_id) as conn:
            refusal = await session_store.take_inbound(
                conn,
                self.agent_id,
                self.project_id,
                self.session_id,
                seq,
                checked["nonce"],
                datetime.now(UTC),
            )
            if refusal is not None:  # raised inside: the transaction takes nothing
                raise FrameError(refusal, CLOSE_BAD_SIGNATURE)
        return checked

    async def signer_for(self, count: int) -> FrameSigner:
        async with self.brain.project_tx(self.project_id) as conn:
            first = await session_store.reserve_outbound(
                conn, self.agent_id, self.session_id, count
            )
        return FrameSigner(self.signer.session, first)

    async def is_open(self) -> bool:
        async with self.brain.project_tx(self.project_id) as conn:
            return await session_store.is_open(conn, self.agent_id, self.session_id)


@dataclass
class HttpLive:
    """This process's entry in ``Brain.live`` for a session opened by hello here: replacing
    it (a newer WebSocket of the same worker) closes the session for every replica."""

    brain: Brain
    project_id: uuid.UUID
    agent_id: uuid.UUID
    session_id: str

    async def close(self, code: int, reason: str) -> None:
        async with self.brain.project_tx(self.project_id) as conn:
            await session_store.close(conn, self.agent_id, self.session_id, code)


def _shared(brain: Brain, row: dict[str, Any]) -> SharedSession:
    agent = {"id": row["agent_id"], "project_id": row["project_id"]}
    session = SharedSession(brain, agent, session_id=row["session_id"])
    session.worker_id = row["worker_id"]
    session.greeted = row["dialect"] == "hello"
    return session


async def hello(
    brain: Brain, agent: dict[str, Any], frame: Any, token_hash: str
) -> tuple[SharedSession, dict[str, Any]]:
    """Answer ``hello`` and open its session; the worker's older sessions are replaced."""
    session = SharedSession(brain, agent)
    ack = await session.hello(frame)
    async with brain.project_tx(session.project_id) as conn:
        await session_store.open_hello(
            conn,
            agent_id=session.agent_id,
            project_id=session.project_id,
            session_id=session.session_id,
            token_hash=token_hash,
            worker_id=session.worker_id,
            now=datetime.now(UTC),
            replaced_code=CLOSE_REPLACED,
        )
    return session, ack


async def by_id(brain: Brain, session_id: str, token_hash: str | None) -> SharedSession:
    """The hello session named by ``X-Z4J-Session``: LookupError when there is none (or it
    went idle), FrameError when the token is not the session's or it was replaced."""
    found = None
    if 0 < len(session_id) <= MAX_SESSION_ID and session_id.isascii() and session_id.isprintable():
        async with brain.platform_tx() as conn:
            found = await session_store.find_hello(conn, session_id, datetime.now(UTC))
    if found is None:
        if token_hash is None:
            raise FrameError("missing agent token", CLOSE_BAD_TOKEN)
        raise LookupError(session_id)
    if token_hash is None or not hmac.compare_digest(found["token_hash"], token_hash):
        raise FrameError("token does not match the session", CLOSE_BAD_TOKEN)
    if found["closed_code"] is not None:
        raise FrameError("session replaced", found["closed_code"])
    return _shared(brain, found)


async def by_nonce(
    brain: Brain, agent: dict[str, Any], nonce: str, token_hash: str
) -> tuple[SharedSession, bool]:
    """The long-poll dialect's session of ``agent`` named by its nonce, made on first use;
    and whether this request made it."""
    now = datetime.now(UTC)
    async with brain.project_tx(agent["project_id"]) as conn:
        row, created = await session_store.use_nonce_session(
            conn,
            agent_id=agent["id"],
            project_id=agent["project_id"],
            session_id=nonce,
            token_hash=token_hash,
            now=now,
        )
        await agent_store.touch(conn, agent["id"], now)
    return _shared(brain, row), created
