"""``GET /agents/telegraf/secrets``: the ``secretstores.http`` store the renderer configures for
every ``secret://`` reference (docs/strataplane/secrets.md).

Telegraf's plugin GETs the URL with ``Authorization: Bearer <token>`` (its ``token`` option),
accepts only status 200 (its default ``success_status_codes``), and decodes the body as one JSON
object of name -> string value; a key a plugin asks for that is missing fails that plugin's
secret resolution. So the body holds, for the Secret names of the agent's served and desired
artifacts, the current value of each Secret whose grant and minAssurance (at the latest
revision) admit the agent; a withheld name is absent and audited (``secret.withhold``), and
each delivered key is one secret_delivery row (channel ``telegraf-secretstore``). ``deliver``
is that rule on its own: Vector's config and Elastic Agent's policies use it too
(agents/vector_secrets.py, agents/elastic_secrets.py).

Unknown or revoked credentials get 401, agents awaiting approval or quarantined 403.

Behind the TLS front (platformkit.http.tls_front), a client certificate the front verified
arrives in ``X-Client-Cert`` (trusted only from ``proxy_from`` peers). A certificate that one of
the tenant's trust anchors (or an intermediate of its bundle) issued for the agent's host, and
that no CRL of the anchor lists, is bound to the agent on first use
(assurance high, audited ``agent.certificate_bind``); from then on the agent must present that
same certificate (403 ``agent.certificate_required``).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from platformkit.crypto import DecryptionError
from platformkit.db.scope import Conn, tenant_transaction
from platformkit.http import problem_responses
from starlette.datastructures import State

from strataplane import errors
from strataplane.actions import fleet_errors as fe
from strataplane.actions import secret_box
from strataplane.actions import secret_errors as se
from strataplane.actions.secrets import keyring, policies_at_latest
from strataplane.agents.client_certs import presented_der
from strataplane.agents.front import AgentRequest, Endpoint, Reply
from strataplane.db import SCOPE
from strataplane.domain.certificates import Presented, host_matches, issued_by, parse_der
from strataplane.domain.secret_grants import withheld
from strataplane.store import audit, fleet_notify, sealed, secret_serving, secrets, trust_anchors
from strataplane.store.secret_serving import Recipient

if TYPE_CHECKING:
    from strataplane.agents.auth import AgentIdentity
    from strataplane.agents.runtime import FleetRuntime

SECRETS_PATH = "/agents/telegraf/secrets"
CHANNEL = "telegraf-secretstore"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="strataplane"'}
_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


def presented_certificate(rt: FleetRuntime, req: AgentRequest) -> Presented | None:
    """The certificate the TLS front verified, when the request came through it."""
    der = presented_der(rt, req)
    return parse_der(der) if der is not None else None


async def _audit(conn: Conn, tenant_id: UUID, agent_id: UUID, action: str, **details: str) -> None:
    event = audit.Event("system", None, action, "agent", str(agent_id), details=details)
    await audit.append(conn, tenant_id, event)


async def _identify(
    rt: FleetRuntime,
    conn: Conn,
    tenant_id: UUID,
    agent_id: UUID,
    agent: Recipient,
    cert: Presented | None,
) -> tuple[str, str | None]:
    """The request's assurance and certificate subject; binds a first certificate. A
    certificate its anchor's CRL lists is never bound, and a bound one found listed is unbound
    (the agent drops to low); while an anchor's CRL cannot be fetched, its certificates do not
    give high assurance."""
    anchors = {a.id: a for a in await trust_anchors.list_anchors(conn, tenant_id)}
    if agent.identity_fingerprint is not None:
        if cert is None or not hmac.compare_digest(cert.fingerprint, agent.identity_fingerprint):
            raise se.CertificateRequired("present the client certificate bound to this agent")
        anchor = anchors.get(agent.identity_anchor_id) if agent.identity_anchor_id else None
        revoked = await rt.crls.revoked(anchor, cert.cert) if anchor is not None else False
        if revoked:
            await trust_anchors.unbind_identity(conn, tenant_id, agent_id)
            await fleet_notify.agent_changed(conn, tenant_id, agent_id)
            await _audit(
                conn, tenant_id, agent_id, "agent.certificate_revoked", subject=cert.subject
            )
            return "low", None
        return ("high", agent.identity_subject) if revoked is False else ("low", None)
    if cert is None:
        return "low", None
    host = await trust_anchors.host_name(conn, tenant_id, agent_id)
    for anchor in anchors.values():
        if not issued_by(cert.cert, anchor.ca_pem):
            continue
        if host is None or not host_matches(cert.cert, anchor.host_mapping, host):
            continue
        revoked = await rt.crls.revoked(anchor, cert.cert)
        if revoked is not False:
            why = "listed in the anchor's CRL" if revoked else "no CRL of the anchor answers for it"
            await _audit(
                conn,
                tenant_id,
                agent_id,
                "agent.certificate_refuse",
                subject=cert.subject,
                reason=why,
            )
            return "low", None
        await trust_anchors.bind_identity(
            conn,
            tenant_id,
            agent_id,
            subject=cert.subject,
            fingerprint=cert.fingerprint,
            anchor_id=anchor.id,
            not_after=cert.not_after,
        )
        await fleet_notify.agent_changed(conn, tenant_id, agent_id)  # caches learn the binding
        await _audit(
            conn,
            tenant_id,
            agent_id,
            "agent.certificate_bind",
            subject=cert.subject,
            anchor=anchor.name,
        )
        return "high", cert.subject
    return "low", None


@dataclass(frozen=True)
class Delivery:
    values: dict[str, str]  # name -> current value, for the names the agent may receive
    refused: dict[str, str]  # name -> reason (not_in_spec, grant, assurance, no_value)
    assurance: str


async def deliver(
    rt: FleetRuntime,
    state: State,
    req: AgentRequest,
    who: AgentIdentity,
    channel: str,
    names: Collection[str] | None = None,
    *,
    record_all: bool = True,
) -> Delivery:
    """Open the current values of ``names`` (default: the Secret names of the agent's served
    and desired artifacts) that the Secrets' grant and minAssurance admit for the requesting
    agent; one secret_delivery row per value handed over on ``channel``, and the refusals
    audited (``secret.withhold``). ``record_all`` False records only versions not delivered on
    the channel before (a configuration served again on every poll). The agent's credential was
    checked by the caller."""
    ring = await keyring(state.services)
    cert = presented_certificate(rt, req)
    tenant_id, agent_id = who.tenant_id, who.agent_id
    values: dict[str, str] = {}
    async with tenant_transaction(rt.pool, SCOPE, tenant_id) as conn:
        agent = await secret_serving.recipient(conn, tenant_id, agent_id)
        if agent is None:
            raise errors.AuthRequired("the agent was forgotten", headers=_CHALLENGE)
        assurance, subject = await _identify(rt, conn, tenant_id, agent_id, agent, cert)
        policies = await policies_at_latest(conn, tenant_id)
        refused: dict[str, str] = {}
        allowed = []
        for name in sorted(agent.secret_refs if names is None else names):
            policy = policies.get(name)
            reason = "not_in_spec" if policy is None else None
            if policy is not None:
                reason = withheld(policy, agent.kind, agent.labels, assurance)
            if reason is None:
                allowed.append(name)
            else:
                refused[name] = reason
        current = await secrets.current_versions(conn, tenant_id, allowed)
        refused |= {name: "no_value" for name in allowed if name not in current}
        rows = await sealed.get_many(conn, tenant_id, [v.value_id for v in current.values()])
        delivered = []
        for name, version in sorted(current.items()):
            row = rows[version.value_id]
            try:
                plain = await secret_box.open_value(ring, conn, tenant_id, row)
            except DecryptionError:
                raise se.SecretUnreadable() from None
            values[name] = plain.decode(errors="replace")  # never an error quoting the value
            delivered.append((name, version.version))
        if not record_all:
            before = await secrets.delivered_versions(
                conn, tenant_id, agent_id, channel, [n for n, _ in delivered]
            )
            delivered = [(n, v) for n, v in delivered if before.get(n) != v]
        await secrets.record_deliveries(
            conn, tenant_id, agent_id, channel, assurance, subject, delivered
        )
        if refused:
            event = audit.Event(
                "system",
                None,
                "secret.withhold",
                "agent",
                str(agent_id),
                details={"channel": channel, "withheld": refused, "assurance": assurance},
            )
            await audit.append(conn, tenant_id, event)
    return Delivery(values, refused, assurance)


async def secrets_for(rt: FleetRuntime, state: State, req: AgentRequest) -> Reply:
    who = await rt.credentials.identify(req.header(b"authorization"))
    serving = await rt.states.get(who) if who is not None else None
    if who is None or serving is None or serving.tenant_state == "deleting":
        raise errors.AuthRequired("unknown or revoked agent credential", headers=_CHALLENGE)
    if not serving.approved:
        raise fe.AgentNotApproved("an operator approves this agent first")
    if serving.quarantined:
        raise se.AgentQuarantined()
    found = await deliver(rt, state, req, who, CHANNEL)
    return Reply(200, _HEADERS, json.dumps(found.values).encode())


def endpoints(state: State) -> dict[str, Endpoint]:
    async def handler(rt: FleetRuntime, req: AgentRequest) -> Reply:
        return await secrets_for(rt, state, req)

    return {SECRETS_PATH: Endpoint(frozenset({"GET"}), handler)}


def openapi_paths() -> dict[str, object]:
    """The path item of the endpoint (served ahead of FastAPI, so documented by hand)."""
    body = {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "Secret name -> current value, for the names the agent may receive.",
    }
    ok = {"description": "The agent's secrets.", "content": {"application/json": {"schema": body}}}
    problems = {str(k): v for k, v in problem_responses(401, 403, 503).items()}
    operation = {
        "tags": ["agents"],
        "summary": "Telegraf secretstores.http",
        "operationId": "telegraf_secrets_get",
        "security": [{"agentCredential": []}],
        "responses": {"200": ok, **problems},
    }
    return {SECRETS_PATH: {"get": operation}}
