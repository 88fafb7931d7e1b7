"""HTTP client for the gateway API (04-API-SPEC.md), one method per route the sidecar uses.

Every failure surfaces as one of two exceptions: GatewayUnreachable when no HTTP answer came
back, GatewayError (AB- code, name, status, detail, retry hint) when the gateway answered with
an error. Each response's ``Date`` header updates the server clock offset, which corrects the
time inside minted ids and key proofs (05 §13.4).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

from agentbus_sidecar.clock import to_ms
from agentbus_sidecar.envelope import MESSAGE, TASK_REQUEST
from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.httpx_lean import httpx

__all__ = ["MESSAGES", "GatewayClient", "problem_error", "problem_of", "route_for"]

CLOUDEVENTS = "application/cloudevents+json"
BLOB_TIMEOUT_S = 300.0


MESSAGES = "/v1/messages"


def route_for(envelope: dict[str, Any]) -> str:
    """The route a signed envelope is posted to: messages, or the typed task routes (04 §6)."""
    kind = envelope["type"]
    if kind == MESSAGE:
        return MESSAGES
    if kind == TASK_REQUEST:
        return "/v1/tasks"
    verb = kind.removeprefix("agentbus.task.").removesuffix(".v1")
    return f"/v1/tasks/{envelope['subject']}/{verb}"


SETTLE_KEYS = {"ack": "acks", "nak": "naks", "term": "terms", "read": "reads"}
"""The list each settlement verb's body carries its items in (04 §5.3-5.6, and the same frames
on the delivery WebSocket, §5.2)."""


def problem_error(response: httpx.Response) -> GatewayError:
    """Map an error response (problem+json or not) to GatewayError."""
    problem: dict[str, Any] = {}
    try:
        body = response.json()
        problem = body if isinstance(body, dict) else {}
    except ValueError:
        pass
    header = response.headers.get("Retry-After")
    retry_s = int(header.strip()) if header and header.strip().isdigit() else None
    return _error(response.status_code, problem, retry_s, response.reason_phrase or "")


def problem_of(result: dict[str, Any]) -> GatewayError:
    """The GatewayError of one refused envelope of a batch answer (``status`` and
    ``problem``)."""
    problem = result.get("problem")
    return _error(int(result.get("status", 0)), problem if isinstance(problem, dict) else {})


def _error(
    status: int, problem: dict[str, Any], retry_s: int | None = None, reason: str = ""
) -> GatewayError:
    retry_ms = problem.get("retry_after_ms")
    if not isinstance(retry_ms, int) and retry_s is not None:
        retry_ms = retry_s * 1000
    detail = problem.get("detail") or problem.get("title") or reason
    code, name = problem.get("code"), problem.get("name")
    return GatewayError(
        status,
        code if isinstance(code, str) else None,
        name if isinstance(name, str) else None,
        str(detail),
        retry_after_ms=retry_ms if isinstance(retry_ms, int) else None,
        problem=problem,
    )


class GatewayClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 15.0,
        on_clock_offset: Callable[[int], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.on_clock_offset = on_clock_offset
        self._http = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout_s, connect=5.0),
            transport=transport,
            headers={"User-Agent": "agentbus-sidecar/0.1"},
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        bearer: str | None = None,
        json: Any = None,
        content: bytes | None = None,
        content_type: str = CLOUDEVENTS,
        params: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        headers = {"Accept": "application/json"}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        if content is not None:
            headers["Content-Type"] = content_type
        extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        started = time.time()
        try:
            response = await self._http.request(
                method, path, headers=headers, json=json, content=content, params=params, **extra
            )
        except httpx.TransportError as exc:
            raise GatewayUnreachable(self.base_url, str(exc) or type(exc).__name__) from exc
        self._observe_clock(response, started, time.time())
        if response.status_code >= 400:
            raise problem_error(response)
        return response

    def _observe_clock(self, response: httpx.Response, started: float, ended: float) -> None:
        date = response.headers.get("Date")
        if self.on_clock_offset is None or not date:
            return
        try:
            server_ms = to_ms(parsedate_to_datetime(date)) + 500  # Date has whole seconds
        except (TypeError, ValueError):
            return
        self.observe_server_ms(server_ms, started, ended)

    def observe_server_ms(self, server_ms: int, started: float, ended: float) -> None:
        """The gateway's clock read as ``server_ms`` by an exchange that ran from ``started``
        to ``ended`` (local ``time.time()``): the offset, taken at the exchange's midpoint."""
        if self.on_clock_offset is not None:
            self.on_clock_offset(server_ms - int((started + ended) * 500))

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self.request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return {}
        body: dict[str, Any] = response.json()
        return body

    # Agents and credentials (04 §2, §3), authenticated by the integration token.
    async def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._json("POST", "/v1/agents", bearer=token, json=body)

    async def issue_credential(self, token: str, agent_id: str, proof: str) -> dict[str, Any]:
        path = f"/v1/agents/{agent_id}/credentials"
        return await self._json("POST", path, bearer=token, json={"proof": proof})

    async def refresh_credential(self, credential: str, proof: str) -> dict[str, Any]:
        path = "/v1/credentials/refresh"
        return await self._json("POST", path, bearer=credential, json={"proof": proof})

    # Agent routes, authenticated by the agent credential.
    async def send(self, bearer: str, path: str, body: bytes) -> dict[str, Any]:
        return await self._json("POST", path, bearer=bearer, content=body)

    async def send_batch(self, bearer: str, bodies: list[bytes]) -> list[dict[str, Any]]:
        """Signed envelopes (their stored bytes) in one ``POST /v1/messages/batch``; the
        per-envelope results, in order (04 §4.7)."""
        body = b'{"envelopes":[' + b",".join(bodies) + b"]}"
        answer = await self._json(
            "POST", "/v1/messages/batch", bearer=bearer, content=body,
            content_type="application/json",
        )  # fmt: skip
        results: list[dict[str, Any]] = answer.get("results", [])
        return results

    async def receive(self, bearer: str, wait_s: int = 25, max_items: int = 100) -> dict[str, Any]:
        params = {"wait_s": wait_s, "max": max_items}
        return await self._json(
            "GET", "/v1/inbox", bearer=bearer, params=params, timeout_s=wait_s + 15
        )

    async def settle(
        self, bearer: str, verb: str, items: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``verb`` is ack, nak, term or read (04 §5.3-5.6); returns the per-item results."""
        body = await self._json(
            "POST", f"/v1/inbox/{verb}", bearer=bearer, json={SETTLE_KEYS[verb]: items}
        )
        results: list[dict[str, Any]] = body.get("results", [])
        return results

    async def get_message(self, bearer: str, msg_id: str, envelope: bool = False) -> dict[str, Any]:
        params = {"include": "envelope"} if envelope else None
        return await self._json("GET", f"/v1/messages/{msg_id}", bearer=bearer, params=params)

    # Blobs (04 §8): raw bytes both ways.
    async def upload_blob(self, bearer: str, data: bytes, content_type: str) -> dict[str, Any]:
        return await self._json(
            "POST", "/v1/blobs", bearer=bearer, content=data, content_type=content_type,
            timeout_s=BLOB_TIMEOUT_S,
        )  # fmt: skip

    async def download_blob(
        self, bearer: str, blob_id: str, message: str | None = None
    ) -> httpx.Response:
        params = {"message": message} if message else None
        return await self.request(
            "GET", f"/v1/blobs/{blob_id}", bearer=bearer, params=params, timeout_s=BLOB_TIMEOUT_S
        )

    async def redrive(self, bearer: str, msg_id: str) -> dict[str, Any]:
        return await self._json("POST", f"/v1/messages/{msg_id}/redrive", bearer=bearer)

    async def message_trace(self, bearer: str, msg_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/messages/{msg_id}/trace", bearer=bearer)

    async def get_receipt(self, bearer: str, rcp_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/receipts/{rcp_id}", bearer=bearer)

    async def get_task(self, bearer: str, task_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/v1/tasks/{task_id}", bearer=bearer)

    async def list_tasks(self, bearer: str, role: str = "", state: str = "") -> dict[str, Any]:
        params = {k: v for k, v in (("role", role), ("state", state)) if v}
        return await self._json("GET", "/v1/tasks", bearer=bearer, params=params)

    async def list_messages(self, bearer: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._json("GET", "/v1/messages", bearer=bearer, params=params)

    async def list_agents(self, bearer: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._json("GET", "/v1/agents", bearer=bearer, params=params)

    async def list_keys(self, bearer: str, agent_id: str) -> list[dict[str, Any]]:
        response = await self.request("GET", f"/v1/agents/{agent_id}/keys", bearer=bearer)
        keys: list[dict[str, Any]] = response.json()
        return keys

    async def add_key(
        self, bearer: str, agent_id: str, public_key: str, proof: str
    ) -> dict[str, Any]:
        body = {"public_key": public_key, "proof": proof}
        return await self._json("POST", f"/v1/agents/{agent_id}/keys", bearer=bearer, json=body)

    async def revoke_key(self, bearer: str, agent_id: str, key_id: str) -> None:
        await self._json("DELETE", f"/v1/agents/{agent_id}/keys/{key_id}", bearer=bearer)

    async def upload_usage(self, bearer: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._json("POST", "/v1/usage", bearer=bearer, json={"records": records})

    async def heartbeat(self, bearer: str, agent_id: str, body: dict[str, Any]) -> None:
        await self._json("POST", f"/v1/agents/{agent_id}/heartbeat", bearer=bearer, json=body)

    async def healthz(self, timeout_s: float = 5.0) -> httpx.Response:
        return await self.request("GET", "/healthz", timeout_s=timeout_s)
