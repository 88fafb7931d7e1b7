"""Push delivery for ``agentbus sidecar run``: the gateway's delivery WebSocket (04-API-SPEC.md
§5.2) in place of long-polls.

One connection at a time. After the gateway's ``hello``, every queued ack goes out first (as
before a long-poll's first pull, so it can cancel the redelivery it would otherwise cause), then
the sidecar grants credit for ``CREDIT`` deliveries. Frames that arrive together are handled as
one batch:

- ``delivery``: taken into custody exactly as pulled ones (``inbound.accept_deliveries``), then
  the outbox's due settlements (their transport acks, and any read, nak or term queued
  meanwhile) flushed as frames on the socket (answered by ``result`` frames, the same items and
  results as the HTTP routes), then the credit they used is granted again. A frame left
  unanswered or cut off by the connection's end leaves its rows in the outbox with their retry
  scheduled, and the loop's flusher sends them when they are due;
- ``status``: the gateway's notice about a message this agent sent, added once to its receipt's
  ``local_events`` (so ``trace`` shows it offline) and logged;
- ``ping``: answered with ``pong``.

While the connection is open the loop's flusher uses it too (``outbound.Uplink``): its
settlements go as frames, and its batches of plain messages as ``send`` frames when the
gateway's ``hello`` lists ``send`` (an older gateway's does not, and they go over HTTP). A frame
whose answer does not come fails as an unanswered HTTP request does, so its rows are retried the
same way, over HTTP or the next connection; the gateway answers a resent envelope as a replay.

The credential is renewed in place with an ``auth`` frame once the session has renewed it. When
the connection ends, the sidecar connects again after the long-poll's backoff (1 s to 30 s); a
close 4401 (credential refused) drops the cached credential first. A gateway, or a proxy in
front of it, that answers the upgrade with an HTTP status below 500 raises ``PushUnavailable``,
and the loop long-polls instead (``sync.run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from agentbus_sidecar.backoff import reconnect_delay_s
from agentbus_sidecar.client import SETTLE_KEYS, problem_of
from agentbus_sidecar.clock import parse_ts, to_ms, utcnow
from agentbus_sidecar.errors import GatewayError, GatewayUnreachable
from agentbus_sidecar.inbound import accept_deliveries
from agentbus_sidecar.outbound import FlushReport, Uplink, flush_settlements
from agentbus_sidecar.runtime import Runtime
from agentbus_sidecar.store import receipts

__all__ = [
    "CREDIT",
    "DeliverySocket",
    "PushUnavailable",
    "open_socket",
    "receive_pushed",
    "socket_url",
]

# agentbus.v2 sends a pull's deliveries in one ``deliveries`` frame; a gateway that knows only
# agentbus.v1 sends one ``delivery`` frame each, and the reader expands the first into the second.
SUBPROTOCOLS = ("agentbus.v2", "agentbus.v1")
PATH = "/v1/inbox/ws"
SEND = "send"  # the frame type a gateway's ``hello`` names when it takes batches on the socket
CREDIT = 100
OPEN_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 15.0  # for a frame's ``result``: as long as an HTTP request may take
# A ``deliveries`` frame holds a pull of at most 4 MiB, and over that one delivery (an envelope
# of at most 320 KiB).
MAX_FRAME_BYTES = 5 * 1024 * 1024
BATCH_MAX = 500  # frames handled together at most
CREDENTIAL_REFUSED = 4401
REPLACED = 4002
GATEWAY_STOPPING = 1012  # a restart or a scale-down: connect again, to it or a sibling

Log = Callable[[str], None]


class PushUnavailable(Exception):
    """The gateway's address does not upgrade to the delivery WebSocket."""


class _Ended(Exception):
    """The connection ended: ``code`` is the close code the gateway sent, if any, and
    ``greeted`` whether the gateway had said hello on it."""

    def __init__(self, code: int | None, reason: str, *, greeted: bool) -> None:
        super().__init__(reason)
        self.code, self.greeted = code, greeted


def socket_url(gateway_url: str) -> str:
    """``ws://`` or ``wss://`` for the gateway's ``http://`` or ``https://`` URL, at ``PATH``
    below any path prefix the gateway is served under."""
    parts = urlsplit(gateway_url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"not an http(s) gateway URL: {gateway_url!r}")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + PATH, "", ""))


async def receive_pushed(
    rt: Runtime, stop: asyncio.Event, lock: asyncio.Lock, log: Log, uplink: Uplink
) -> None:
    """Receive over the WebSocket until ``stop`` is set, lending each open connection to the
    flusher through ``uplink``; raises ``PushUnavailable``."""
    failures = 0
    while not stop.is_set():
        try:
            await _connection(rt, stop, lock, log, uplink)
            return  # stopped
        except (GatewayUnreachable, GatewayError, sqlite3.OperationalError) as exc:
            # A locked or full disk, like an outage, is a reason to let AckWait redeliver.
            greeted, what = False, f"delivery WebSocket failed ({exc})"
        except _Ended as ended:
            greeted, what = ended.greeted, f"delivery WebSocket closed ({ended})"
            if ended.code == CREDENTIAL_REFUSED:
                rt.session.creds.agent_credential = None
            elif ended.code == REPLACED:  # two receivers for one agent: do not take turns fast
                greeted = False
                what = "delivery WebSocket replaced by another receiver for this agent"
            elif ended.code == GATEWAY_STOPPING:
                what = "the gateway is stopping; delivery WebSocket closed"
        # a connection that worked comes back at once; failed attempts back off further
        failures = 1 if greeted else failures + 1
        delay = reconnect_delay_s(failures)
        log(f"{what}; connecting again in {delay:.1f} s")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)


async def open_socket(gateway_url: str, bearer: str) -> ClientConnection:
    """The delivery WebSocket of ``gateway_url``, opened with credential ``bearer``;
    ``PushUnavailable`` when the upgrade is answered with an HTTP status below 500,
    ``GatewayUnreachable`` when there is no connection or the answer is a 5xx."""
    try:
        return await connect(
            socket_url(gateway_url),
            additional_headers={"Authorization": f"Bearer {bearer}"},
            subprotocols=list(SUBPROTOCOLS),  # type: ignore[arg-type]
            open_timeout=OPEN_TIMEOUT_S,
            max_size=MAX_FRAME_BYTES,
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        if status >= 500:  # a proxy whose gateway is away: try again later
            raise GatewayUnreachable(gateway_url, f"HTTP {status}") from exc
        raise PushUnavailable(f"HTTP {status}") from exc
    except InvalidURI as exc:
        raise PushUnavailable(str(exc)) from exc
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        raise GatewayUnreachable(gateway_url, str(exc) or type(exc).__name__) from exc


async def _connection(
    rt: Runtime, stop: asyncio.Event, lock: asyncio.Lock, log: Log, uplink: Uplink
) -> None:
    """One connection, until ``stop`` (returns) or its end (raises ``_Ended``)."""
    bearer = await rt.session.bearer()
    started = time.time()
    ws = await open_socket(rt.creds.gateway_url, bearer)
    frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    sock = DeliverySocket(ws, bearer, rt.creds.gateway_url)
    reader = asyncio.create_task(sock.read(frames))
    stopper = asyncio.create_task(stop.wait())
    try:
        hello = await _hello(ws, frames)
        _observe_clock(rt, hello, started, time.time())
        async with lock:
            await flush_settlements(rt, utcnow(), FlushReport(), drain=True, settle=sock.settle)
        uplink.settle = sock.settle
        if SEND in hello.get("frames", ()):  # an older gateway takes sends over HTTP only
            uplink.send_batch = sock.send_batch
        await sock.send({"type": "credit", "id": sock.next_id(), "n": CREDIT})
        log(f"receiving over the delivery WebSocket (connection {hello.get('connection_id')})")
        while True:
            getter = asyncio.ensure_future(frames.get())
            await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                return
            batch = [getter.result()]
            while len(batch) < BATCH_MAX and not frames.empty() and batch[-1] is not None:
                batch.append(frames.get_nowait())
            await _handle(rt, sock, lock, [frame for frame in batch if frame is not None], log)
            if batch[-1] is None:
                raise _closed(ws)
            await sock.renew_credential(rt)
    finally:
        uplink.clear()
        stopper.cancel()
        reader.cancel()
        with contextlib.suppress(Exception):
            await ws.close()


class DeliverySocket:
    """An open delivery WebSocket as the loop uses it: frame ids, writes, settle and send
    frames waiting for their ``result``, and the credential it holds."""

    def __init__(self, ws: ClientConnection, bearer: str, gateway_url: str) -> None:
        self.ws, self.bearer, self.gateway_url = ws, bearer, gateway_url
        self.auth_id: str | None = None  # of the ``auth`` frame not answered yet
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}  # frames by id
        self._ids = 0

    def next_id(self) -> str:
        self._ids += 1
        return f"c{self._ids}"

    async def send(self, frame: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):  # the reader reports the end
            await self.ws.send(json.dumps(frame))

    async def settle(self, verb: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """An ``ack``, ``nak``, ``term`` or ``read`` frame and the results of its ``result``
        frame, for ``outbound.flush_settlements``: no answer in time, or the connection
        ending first, is ``GatewayUnreachable`` (the outbox keeps the rows and retries); a
        ``problem`` is the GatewayError it names."""
        key = SETTLE_KEYS[verb]
        return await self._ask(
            verb, lambda frame_id: json.dumps({"type": verb, "id": frame_id, key: items})
        )

    async def send_batch(self, bodies: list[bytes]) -> list[dict[str, Any]]:
        """Signed envelopes (their stored bytes, sent as they are) in one ``send`` frame; the
        per-envelope results, in order, as ``POST /v1/messages/batch`` answers them, for
        ``outbound.flush_sends``. Failures as for ``settle``."""
        envelopes = b",".join(bodies).decode()

        def frame(frame_id: str) -> str:
            return f'{{"type":"send","id":{json.dumps(frame_id)},"envelopes":[{envelopes}]}}'

        return await self._ask("send", frame)

    async def _ask(self, kind: str, frame: Callable[[str], str]) -> list[dict[str, Any]]:
        """Send the text ``frame(id)`` and wait for the ``result`` frame answering it."""
        frame_id = self.next_id()
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[frame_id] = answer
        try:
            await self.ws.send(frame(frame_id))
            result = await asyncio.wait_for(answer, ANSWER_TIMEOUT_S)
        except (ConnectionClosed, TimeoutError) as exc:
            reason = f"no answer to a {kind} frame on the delivery WebSocket"
            raise GatewayUnreachable(self.gateway_url, reason) from exc
        finally:
            self._waiting.pop(frame_id, None)
        problem = result.get("problem")
        if isinstance(problem, dict):
            raise problem_of({"status": problem.get("status", 0), "problem": problem})
        results: list[dict[str, Any]] = result.get("results") or []
        return results

    def answer(self, frame: dict[str, Any]) -> bool:
        """Hand a ``result`` frame to the frame waiting for it; False if none is."""
        waiting = (
            self._waiting.get(str(frame.get("for"))) if frame.get("type") == "result" else None
        )
        if waiting is None or waiting.done():
            return False
        waiting.set_result(frame)
        return True

    def end(self) -> None:
        """The connection ended: no frame still waiting will be answered."""
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(ConnectionClosed(None, None))

    async def read(self, frames: asyncio.Queue[dict[str, Any] | None]) -> None:
        """Every JSON object frame into ``frames`` (a ``deliveries`` frame as one ``delivery``
        frame each), then None when the connection ends; answers to settle and send frames go
        straight to the settlement or flush waiting for them."""
        try:
            async for message in self.ws:
                frame = _parse(message) if isinstance(message, str) else None
                if frame is None or self.answer(frame):
                    continue
                for each in _expanded(frame):
                    frames.put_nowait(each)
        except ConnectionClosed:
            pass
        finally:
            self.end()
            frames.put_nowait(None)

    async def renew_credential(self, rt: Runtime) -> None:
        """Hand the gateway the session's renewed credential before the old one expires."""
        with contextlib.suppress(GatewayUnreachable, GatewayError):
            bearer = await rt.session.bearer()
            if bearer != self.bearer:
                self.bearer, self.auth_id = bearer, self.next_id()
                await self.send({"type": "auth", "id": self.auth_id, "token": bearer})


async def _hello(
    ws: ClientConnection, frames: asyncio.Queue[dict[str, Any] | None]
) -> dict[str, Any]:
    """The gateway's first frame. It closes before saying hello when it refuses the credential
    (4401) or the agent (4403)."""
    try:
        first = await asyncio.wait_for(frames.get(), timeout=OPEN_TIMEOUT_S)
    except TimeoutError:
        raise _Ended(None, "no hello from the gateway", greeted=False) from None
    if first is None or first.get("type") != "hello":
        code = ws.close_code
        raise _Ended(code, f"closed before its hello (close {code})", greeted=False)
    return first


def _observe_clock(rt: Runtime, hello: dict[str, Any], started: float, ended: float) -> None:
    """The hello's ``server_time`` keeps the clock offset current, as a response's ``Date``
    does (and to the millisecond)."""
    try:
        server_ms = to_ms(parse_ts(str(hello.get("server_time"))))
    except ValueError:
        return
    rt.client.observe_server_ms(server_ms, started, ended)


def _expanded(frame: dict[str, Any]) -> list[dict[str, Any]]:
    if frame.get("type") != "deliveries":
        return [frame]
    items = frame.get("deliveries")
    listed = items if isinstance(items, list) else []
    return [{"type": "delivery", **item} for item in listed if isinstance(item, dict)]


def _parse(text: str) -> dict[str, Any] | None:
    try:
        frame = json.loads(text)
    except ValueError:
        return None
    return frame if isinstance(frame, dict) else None


async def _handle(
    rt: Runtime, sock: DeliverySocket, lock: asyncio.Lock, frames: list[dict[str, Any]], log: Log
) -> None:
    deliveries: list[dict[str, Any]] = []
    for frame in frames:
        kind = frame.get("type")
        if kind == "delivery":
            deliveries.append(frame)
        elif kind == "status":
            _note_status(rt, frame, log)
        elif kind == "ping":
            await sock.send({"type": "pong", "id": frame.get("id")})
        elif kind == "result":
            _answered(sock, frame, log)
    if not deliveries:
        return
    async with lock:
        outcomes = accept_deliveries(rt.conn, deliveries, rt.address, utcnow())
        await flush_settlements(rt, utcnow(), FlushReport(), settle=sock.settle)
    for msg_id, outcome in outcomes:
        log(f"{msg_id} {outcome}")
    await sock.send({"type": "credit", "id": sock.next_id(), "n": len(deliveries)})


def _answered(sock: DeliverySocket, frame: dict[str, Any], log: Log) -> None:
    problem = frame.get("problem")
    if isinstance(problem, dict):  # e.g. NATS away (AB-9003): the gateway retries by itself
        log(f"the gateway reports {problem.get('code')}: {problem.get('title')}")
    elif frame.get("for") is not None and frame.get("for") == sock.auth_id:
        sock.auth_id = None
        log("credential renewed on the delivery WebSocket")


def _note_status(rt: Runtime, frame: dict[str, Any], log: Log) -> None:
    msg_id, status = frame.get("msg_id"), frame.get("status")
    if not isinstance(msg_id, str) or not isinstance(status, str):
        return
    if receipts.note_status(rt.conn, msg_id, status, utcnow()):
        code = frame.get("error_code")
        log(f"{msg_id} {status}" + (f" ({code})" if code else ""))


def _closed(ws: ClientConnection) -> _Ended:
    code, reason = ws.close_code, ws.close_reason or ""
    return _Ended(code, f"close {code}{': ' + reason if reason else ''}", greeted=True)
