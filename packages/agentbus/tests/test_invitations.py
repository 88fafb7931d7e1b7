"""Invitations against the real gateway app and PostgreSQL, the mail into the outbox folder by
default and to a real SMTP server on loopback (aiosmtpd) by configuration: the workspace role
on accept, a working token for the invitee, one use, expiry, withdrawal, the e-mail of an
existing user refused, only the token's hash stored, every step audited, other tenants kept
out."""

from __future__ import annotations

import email
import hashlib
import re
from email import policy
from pathlib import Path
from typing import Any

import httpx
import psycopg
from agentbus.gateway.config import GatewaySettings
from agentbus.gateway.context import Gateway
from agentbus.gateway.testing import serving
from agentbus.gateway.testkit import make_world, owner_token
from agentbus.ids import format_id
from platformkit.mail import SmtpSecurity
from platformkit.testing.smtp import smtp_server

TOKEN = re.compile(r"abinv_[A-Za-z0-9_-]{43}")


def _token_in(text: str) -> str:
    match = TOKEN.search(text)
    assert match is not None, text
    return match.group(0)


def _outbox(gateway: Gateway) -> list[Any]:
    folder = gateway.settings.config_dir / "outbox"
    files = sorted(folder.glob("*.eml")) if folder.exists() else []
    return [email.message_from_bytes(p.read_bytes(), policy=policy.default) for p in files]


async def _accept(client: httpx.AsyncClient, token: str) -> httpx.Response:
    return await client.post("/v1/invitations/accept", json={"token": token})


async def test_invite_accept_expire_withdraw(
    gateway: Gateway, gateway_client: httpx.AsyncClient, agentbus_db: str
) -> None:
    client = gateway_client
    world = await make_world(gateway, "acme")
    admin = {"Authorization": f"Bearer {world.token}"}
    ws = format_id("ws", world.workspace_id)

    body = {"email": "dev@acme.example", "workspace": ws, "role": "viewer"}
    made = await client.post("/v1/invitations", json=body, headers=admin)
    assert made.status_code == 201, made.text
    invitation = made.json()
    assert (invitation["workspace_id"], invitation["role"], invitation["mailed"]) == (
        ws, "viewer", True)  # fmt: skip
    assert "token" not in invitation
    [mail] = _outbox(gateway)
    assert mail["To"] == "dev@acme.example"
    token = _token_in(mail.get_content())
    with psycopg.connect(agentbus_db) as conn:
        stored = conn.execute("SELECT token_hash FROM invitations WHERE email = %s",
                              ("dev@acme.example",)).fetchone()  # fmt: skip
    assert stored == (hashlib.sha256(token.encode()).digest(),)
    listed = (await client.get("/v1/invitations", headers=admin)).json()["items"]
    assert [i["id"] for i in listed] == [invitation["id"]]

    # another tenant neither sees nor withdraws it, nor can its token be guessed
    other = await make_world(gateway, "globex")
    theirs = {"Authorization": f"Bearer {other.token}"}
    assert (await client.get("/v1/invitations", headers=theirs)).json()["items"] == []
    gone = await client.delete(f"/v1/invitations/{invitation['id']}", headers=theirs)
    assert gone.json()["code"] == "AB-8002"
    assert (await _accept(client, "abinv_" + "x" * 43)).json()["code"] == "AB-8002"
    reader = await owner_token(gateway, world, ["read_audit"])
    refused = await client.post("/v1/invitations", json={"email": "x@acme.example"},
                                headers=reader)  # fmt: skip
    assert refused.json()["code"] == "AB-1007"

    accepted = await _accept(client, token)
    assert accepted.status_code == 200, accepted.text
    joined = accepted.json()
    assert accepted.headers["cache-control"] == "no-store"
    assert (joined["role"], joined["workspace_id"], joined["user"]["tenant_role"]) == (
        "viewer", ws, "member")  # fmt: skip
    members = (await client.get(f"/v1/workspaces/{ws}/members", headers=admin)).json()["items"]
    assert {"user_id": joined["user"]["id"], "role": "viewer"}.items() <= next(
        m for m in members if m["user_id"] == joined["user"]["id"]).items()  # fmt: skip
    mine = {"Authorization": f"Bearer {joined['token']['token']}"}
    assert (await client.get("/v1/agents", headers=mine)).status_code == 200
    assert (await _accept(client, token)).json()["code"] == "AB-8008"  # once only
    assert (await client.get("/v1/invitations", headers=admin)).json()["items"] == []
    again = await client.post("/v1/invitations", json={"email": "DEV@acme.example"}, headers=admin)
    assert again.json()["code"] == "AB-8003"

    # expiry and withdrawal
    late = await client.post("/v1/invitations", json={"email": "late@acme.example"}, headers=admin)
    withdrawn = await client.post("/v1/invitations", json={"email": "no@acme.example"},
                                  headers=admin)  # fmt: skip
    late_token, withdrawn_token = (_token_in(m.get_content()) for m in _outbox(gateway)[1:])
    with psycopg.connect(agentbus_db) as conn:
        conn.execute("UPDATE invitations SET expires_at = now() - interval '1 second'"
                     " WHERE email = 'late@acme.example'")  # fmt: skip
    assert (await _accept(client, late_token)).json()["code"] == "AB-8008"
    deleted = await client.delete(f"/v1/invitations/{withdrawn.json()['id']}", headers=admin)
    assert deleted.status_code == 204, deleted.text
    assert (await _accept(client, withdrawn_token)).json()["code"] == "AB-8002"
    assert late.json()["workspace_id"] is None

    actions = (await client.get("/v1/audit/actions?limit=200", headers=reader)).json()["items"]
    seen = [a["action"] for a in actions if a["action"].startswith("invitation.")]
    assert sorted(seen) == sorted(["invitation.create"] * 3 + ["invitation.accept",
                                                                "invitation.revoke"])  # fmt: skip


async def test_invitation_mail_through_smtp(
    tmp_path: Path, agentbus_db: str, nats_url: str
) -> None:
    with smtp_server() as inbox:
        settings = GatewaySettings(
            database_url=agentbus_db, nats_url=nats_url, config_dir=tmp_path / "config",
            background=False, smtp_host="127.0.0.1", smtp_port=inbox.port,
            smtp_security=SmtpSecurity.NONE, mail_from="bus@acme.example",
            public_url="https://bus.acme.example",
        )  # fmt: skip
        async with serving(settings) as (app, client):
            world = await make_world(app.state.gateway, "acme")
            admin = {"Authorization": f"Bearer {world.token}"}
            made = await client.post("/v1/invitations", json={"email": "ops@acme.example"},
                                     headers=admin)  # fmt: skip
            assert made.json()["mailed"] is True, made.text
            [envelope] = inbox.received
            assert envelope.rcpt_tos == ["ops@acme.example"]
            text = email.message_from_bytes(envelope.content, policy=policy.default).get_content()
            assert "https://bus.acme.example/v1/invitations/accept" in text
            assert not (tmp_path / "config" / "outbox").exists()
            joined = await _accept(client, _token_in(text))
            assert joined.status_code == 200, joined.text
            assert joined.json()["token"] is None  # a tenant invitation grants no token

            bounced = await client.post("/v1/invitations", json={"email": "nobody@acme.example"},
                                        headers=admin)  # fmt: skip
            assert bounced.status_code == 201
            assert bounced.json()["mailed"] is False
