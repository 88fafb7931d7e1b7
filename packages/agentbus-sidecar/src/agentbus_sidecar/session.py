"""The agent credential (04-API-SPEC.md §3): issued, cached, refreshed, retried once on 401.

A credential lives 900 s. It is refreshed when a fifth of its lifetime is left, falling back to
a fresh issue with the integration token when refresh fails (04 §3.2). The cached credential is
written to credentials.json, so short CLI commands do not each ask for a new one. ``call`` runs
an agent route with it, ``items`` a paged list route to its end (or a limit). One renewal at a
time: the loop's tasks that need a credential together (the receiver opening its socket, the
flusher's heartbeat) wait for the same one instead of each issuing their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Concatenate

from agentbus_sidecar.client import GatewayClient
from agentbus_sidecar.clock import format_ts, parse_ts, server_now
from agentbus_sidecar.credentials import AgentCredential, Credentials
from agentbus_sidecar.errors import ConfigError, GatewayError
from agentbus_sidecar.keys import key_proof

__all__ = ["AgentSession"]

REFRESH_FRACTION = 0.2
PAGE_MAX = 200


class AgentSession:
    def __init__(
        self,
        client: GatewayClient,
        creds: Credentials,
        save: Callable[[Credentials], None],
    ) -> None:
        self.client = client
        self.creds = creds
        self._save = save
        self._renewing = asyncio.Lock()

    def _identity(self) -> tuple[str, str]:
        if not self.creds.agent_id or not self.creds.key_id:
            raise ConfigError("this agent is not registered yet; run `agentbus register`")
        return self.creds.agent_id, self.creds.key_id

    def _remaining_s(self, cached: AgentCredential) -> float:
        try:
            return (parse_ts(cached.expires_at) - server_now()).total_seconds()
        except ValueError:
            return 0.0

    def _fresh(self) -> str | None:
        cached = self.creds.agent_credential
        if cached is not None and self._remaining_s(cached) > REFRESH_FRACTION * cached.expires_in:
            return cached.access_token
        return None

    async def bearer(self) -> str:
        """A usable agent credential, issuing or refreshing one if needed."""
        fresh = self._fresh()
        if fresh is not None:
            return fresh
        async with self._renewing:
            return self._fresh() or await self._renew()

    async def _renew(self) -> str:
        agent_id, key_id = self._identity()
        cached = self.creds.agent_credential
        if cached is not None:
            remaining = self._remaining_s(cached)
            if remaining > 5:
                proof = key_proof(self.creds.signing_key(), agent_id, server_now(), key_id)
                try:
                    answer = await self.client.refresh_credential(cached.access_token, proof)
                except GatewayError:  # a fresh issue follows, with the offset this corrected
                    answer = None
                if answer is not None:
                    return self._keep(answer)
        return await self._issue(agent_id, key_id)

    async def _issue(self, agent_id: str, key_id: str) -> str:
        token = self.creds.integration_token
        if not token:
            raise ConfigError(
                "the agent credential has expired and no integration token is stored; "
                "run `agentbus login`"
            )

        async def issue() -> str:
            proof = key_proof(self.creds.signing_key(), agent_id, server_now(), key_id)
            return self._keep(await self.client.issue_credential(token, agent_id, proof))

        try:
            return await issue()
        except GatewayError as exc:
            if not exc.clock_skew:
                raise
        # The proof's time was off (AB-1012): the answer that said so has corrected the clock
        # offset, so a proof made now is dated right.
        return await issue()

    def _keep(self, answer: dict[str, object]) -> str:
        access, lifetime = answer.get("access_token"), answer.get("expires_in", 900)
        if not isinstance(access, str) or not isinstance(lifetime, int):
            raise GatewayError(200, None, None, "credential response without access_token")
        expires_at = answer.get("expires_at")
        if not isinstance(expires_at, str):
            expires_at = format_ts(server_now() + timedelta(seconds=lifetime))
        self.creds.agent_credential = AgentCredential(access, expires_at, lifetime)
        self._save(self.creds)
        return access

    def _drop(self, refused: str) -> None:
        """Forget the credential the gateway refused, unless another task has replaced it."""
        cached = self.creds.agent_credential
        if cached is not None and cached.access_token == refused:
            self.creds.agent_credential = None

    async def items(
        self,
        fn: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
        params: dict[str, Any],
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The ``items`` of a paged list route (``fn(bearer, params)``), page after page by
        ``next_cursor``, up to ``limit`` (pages of at most 200)."""
        found: list[dict[str, Any]] = []
        query = dict(params)
        while limit is None or len(found) < limit:
            query["limit"] = PAGE_MAX if limit is None else min(PAGE_MAX, limit - len(found))
            page = await self.call(fn, query)
            found += page.get("items", [])
            if not page.get("next_cursor"):
                break
            query["cursor"] = page["next_cursor"]
        return found

    async def call[**P, T](
        self, fn: Callable[Concatenate[str, P], Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``fn(bearer, ...)``; on a refused credential, renew it and try once more."""
        refused = await self.bearer()
        try:
            return await fn(refused, *args, **kwargs)
        except GatewayError as exc:
            if not exc.credential_rejected:
                raise
        self._drop(refused)
        return await fn(await self.bearer(), *args, **kwargs)
