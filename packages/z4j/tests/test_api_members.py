"""Invitations, role changes and removals through the API; mail to the outbox and over SMTP."""

from __future__ import annotations

import email
import re
import uuid
from collections.abc import Iterator
from email import policy
from typing import Any

import httpx
import psycopg
import pytest
from platformkit.testing.services import free_port
from platformkit.testing.smtp import SmtpInbox, smtp_server
from z4j.brain import Brain
from z4j.settings import Settings

from .conftest import Seed

NEW_PASSWORD = "a fresh and long passphrase"
_LINK = re.compile(r"https?://\S+/invite/(z4ji_[A-Za-z0-9_-]+)")


def outbox_tokens(settings: Settings) -> list[str]:
    """The invitation tokens of the mails in the outbox folder, oldest first."""
    folder = settings.config_dir / "outbox"
    found = []
    for path in sorted(folder.iterdir()):
        message = email.message_from_bytes(path.read_bytes(), policy=policy.default)
        body = message.get_body()
        assert body is not None
        match = _LINK.search(body.get_content())
        assert match is not None
        found.append(match.group(1))
    return found


async def _invite(http: httpx.AsyncClient, project: uuid.UUID, address: str, role: str) -> Any:
    return await http.post(
        f"/api/v1/projects/{project}/invitations", json={"email": address, "role": role}
    )


async def test_an_invited_newcomer_accepts_once_with_a_new_password(
    seed: Seed, brain: Brain, client: httpx.AsyncClient, z4j_database: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        sent = await _invite(http, project, "New@Example.com", "operator")
        assert sent.status_code == 201, sent.text
        assert sent.json()["email"] == "new@example.com"
        assert "token" not in sent.text
        assert "z4ji_" not in sent.text
        pending = (await http.get(f"/api/v1/projects/{project}/invitations")).json()
        assert [p["email"] for p in pending] == ["new@example.com"]
    [token] = outbox_tokens(brain.settings)
    weak = await client.post("/api/v1/invitations/accept", json={"token": token, "password": "x"})
    assert weak.status_code == 422
    assert weak.json()["field"] == "password"
    accepted = await client.post(
        "/api/v1/invitations/accept", json={"token": token, "password": NEW_PASSWORD}
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json() == {"project_id": str(project)}
    me = await client.get("/api/v1/auth/me")  # the accept signed the newcomer in
    assert me.json()["email"] == "new@example.com"
    members = (await client.get(f"/api/v1/projects/{project}/members")).json()
    assert {m["email"]: m["role"] for m in members}["new@example.com"] == "operator"
    async with httpx.AsyncClient(transport=client._transport, base_url=client.base_url) as other:
        twice = await other.post(
            "/api/v1/invitations/accept", json={"token": token, "password": NEW_PASSWORD}
        )
    assert twice.status_code == 404
    assert twice.json()["code"] == "invitation.not_found"
    with psycopg.connect(z4j_database) as conn:
        stored = conn.execute("SELECT token_hash, accepted_at FROM invitations").fetchall()
        actions = [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]
    assert len(stored) == 1
    assert token not in stored[0][0]
    assert stored[0][1] is not None
    assert actions[-3:] == ["user.create", "member.add", "auth.login"]
    assert "invitation.create" in actions


async def test_an_existing_account_accepts_signed_in_as_itself(
    seed: Seed, brain: Brain, client: httpx.AsyncClient
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    await seed.user("ada@example.com")
    await seed.user("eve@example.com")
    async with seed.signed_in("own@example.com") as http:
        assert (await _invite(http, project, "ada@example.com", "viewer")).status_code == 201
    [token] = outbox_tokens(brain.settings)
    taken = await client.post(
        "/api/v1/invitations/accept", json={"token": token, "password": NEW_PASSWORD}
    )
    assert taken.status_code == 409
    assert taken.json()["code"] == "user.email_taken"
    bare = await client.post("/api/v1/invitations/accept", json={"token": token})
    assert bare.status_code == 401
    async with seed.signed_in("eve@example.com") as eve:
        foreign = await eve.post("/api/v1/invitations/accept", json={"token": token})
        assert foreign.status_code == 403
        assert foreign.json()["code"] == "invitation.other_user"
    async with seed.signed_in("ada@example.com") as ada:
        joined = await ada.post("/api/v1/invitations/accept", json={"token": token})
        assert joined.status_code == 200, joined.text
        role = {
            m["email"]: m["role"]
            for m in (await ada.get(f"/api/v1/projects/{project}/members")).json()
        }
        assert role["ada@example.com"] == "viewer"
    async with seed.signed_in("own@example.com") as http:
        again = await _invite(http, project, "ada@example.com", "viewer")
        assert again.status_code == 409
        assert again.json()["code"] == "member.exists"


async def test_invitations_are_limited_replaced_revoked_and_expire(
    seed: Seed, brain: Brain, client: httpx.AsyncClient, z4j_database: str
) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    await seed.member(project, await seed.user("adm@example.com"), "admin")
    await seed.member(project, await seed.user("op@example.com"), "operator")
    async with seed.signed_in("op@example.com") as http:
        assert (await _invite(http, project, "x@example.com", "viewer")).status_code == 403
    async with seed.signed_in("adm@example.com") as http:
        owner_grant = await _invite(http, project, "x@example.com", "owner")
        assert owner_grant.status_code == 403
        bad = await _invite(http, project, "not an email", "viewer")
        assert bad.status_code == 422
        assert bad.json()["field"] == "email"
        first = (await _invite(http, project, "x@example.com", "viewer")).json()
        second = (await _invite(http, project, "x@example.com", "operator")).json()
        pending = (await http.get(f"/api/v1/projects/{project}/invitations")).json()
        assert [p["id"] for p in pending] == [second["id"]]
        old_token, new_token = outbox_tokens(brain.settings)
        replaced = await client.post(
            "/api/v1/invitations/accept", json={"token": old_token, "password": NEW_PASSWORD}
        )
        assert replaced.status_code == 404
        gone = await http.delete(f"/api/v1/projects/{project}/invitations/{second['id']}")
        assert gone.status_code == 204
        assert (
            await http.delete(f"/api/v1/projects/{project}/invitations/{first['id']}")
        ).status_code == 404
        revoked = await client.post(
            "/api/v1/invitations/accept", json={"token": new_token, "password": NEW_PASSWORD}
        )
        assert revoked.status_code == 404
        await _invite(http, project, "late@example.com", "viewer")
    late_token = outbox_tokens(brain.settings)[-1]
    with psycopg.connect(z4j_database) as conn:
        conn.execute(
            "UPDATE invitations SET expires_at = now() - interval '1 second' "
            "WHERE email = 'late@example.com'"
        )
    expired = await client.post(
        "/api/v1/invitations/accept", json={"token": late_token, "password": NEW_PASSWORD}
    )
    assert expired.status_code == 404
    garbage = await client.post(
        "/api/v1/invitations/accept", json={"token": "z4ji_nope", "password": NEW_PASSWORD}
    )
    assert garbage.status_code == 404


async def test_roles_change_and_members_leave_but_a_project_keeps_an_owner(seed: Seed) -> None:
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    admin = await seed.user("adm@example.com")
    operator = await seed.user("op@example.com")
    viewer = await seed.user("view@example.com")
    await seed.member(project, admin, "admin")
    await seed.member(project, operator, "operator")
    await seed.member(project, viewer, "viewer")
    url = f"/api/v1/projects/{project}/members"
    async with seed.signed_in("view@example.com") as http:
        refused = await http.delete(f"{url}/{operator.id}")
        assert refused.status_code == 403
    async with seed.signed_in("adm@example.com") as http:
        demoted = await http.patch(f"{url}/{operator.id}", json={"role": "viewer"})
        assert demoted.status_code == 200
        assert demoted.json()["role"] == "viewer"
        on_owner = await http.patch(f"{url}/{owner.id}", json={"role": "viewer"})
        assert on_owner.status_code == 403
        assert (await http.patch(f"{url}/{viewer.id}", json={"role": "owner"})).status_code == 403
        assert (
            await http.patch(f"{url}/{uuid.uuid4()}", json={"role": "viewer"})
        ).status_code == 404
    async with seed.signed_in("own@example.com") as http:
        last = await http.patch(f"{url}/{owner.id}", json={"role": "admin"})
        assert last.status_code == 409
        assert last.json()["code"] == "member.last_owner"
        leave = await http.delete(f"{url}/{owner.id}")
        assert leave.status_code == 409
        promoted = await http.patch(f"{url}/{admin.id}", json={"role": "owner"})
        assert promoted.status_code == 200
        stepped_down = await http.patch(f"{url}/{owner.id}", json={"role": "admin"})
        assert stepped_down.status_code == 200
    async with seed.signed_in("view@example.com") as http:
        left = await http.delete(f"{url}/{viewer.id}")
        assert left.status_code == 204
        assert (await http.get(url)).status_code == 404
    async with seed.signed_in("adm@example.com") as http:
        roles = {m["email"]: m["role"] for m in (await http.get(url)).json()}
    assert roles == {
        "adm@example.com": "owner",
        "own@example.com": "admin",
        "op@example.com": "viewer",
    }


@pytest.fixture
def smtp_inbox() -> Iterator[SmtpInbox]:
    with smtp_server() as inbox:
        yield inbox


async def test_with_smtp_configured_the_invitation_goes_to_the_mail_server(
    seed: Seed, brain: Brain, client: httpx.AsyncClient, smtp_inbox: SmtpInbox
) -> None:
    inbox = smtp_inbox
    brain.settings.smtp_host, brain.settings.smtp_port = "127.0.0.1", inbox.port
    brain.settings.smtp_security = brain.settings.smtp_security.NONE
    owner = await seed.user("own@example.com")
    project = await seed.project(owner)
    async with seed.signed_in("own@example.com") as http:
        assert (await _invite(http, project, "ada@example.com", "viewer")).status_code == 201
    (envelope,) = inbox.received
    assert envelope.rcpt_tos == ["ada@example.com"]
    assert isinstance(envelope.content, bytes)
    match = _LINK.search(envelope.content.decode())
    assert match is not None
    assert not (brain.settings.config_dir / "outbox").exists()
    accepted = await client.post(
        "/api/v1/invitations/accept", json={"token": match.group(1), "password": NEW_PASSWORD}
    )
    assert accepted.status_code == 200
    brain.settings.smtp_port = free_port()  # nothing listens there
    async with seed.signed_in("own@example.com") as http:
        failed = await _invite(http, project, "bob@example.com", "viewer")
    assert failed.status_code == 502
    assert failed.json()["code"] == "mail.failed"


async def test_a_brain_administrator_restores_an_owner(seed: Seed, z4j_database: str) -> None:
    """A project whose only owner is locked out: its admin cannot make an owner, a brain
    administrator can (a member promoted, or an account added), audited."""
    owner = await seed.user("gone@example.com")
    project = await seed.project(owner)
    admin = await seed.user("stays@example.com")
    await seed.member(project, admin, "admin")
    await seed.user("root@example.com", is_admin=True)
    await seed.user("fresh@example.com")
    url = f"/api/v1/projects/{project}/owners"
    async with seed.signed_in("stays@example.com") as http:
        refused = await http.post(url, json={"email": "stays@example.com"})
        assert refused.status_code == 403, refused.text
    async with seed.signed_in("root@example.com") as http:
        promoted = await http.post(url, json={"email": "stays@example.com"})
        added = await http.post(url, json={"email": "fresh@example.com"})
        unknown = await http.post(url, json={"email": "nobody@example.com"})
        roles = {m["email"]: m["role"] for m in (await http.get(f"{url[:-7]}/members")).json()}
    assert (promoted.status_code, promoted.json()["role"]) == (200, "owner")
    assert (added.status_code, added.json()["role"]) == (200, "owner")
    assert unknown.status_code == 404
    assert roles == {
        "gone@example.com": "owner",
        "stays@example.com": "owner",
        "fresh@example.com": "owner",
    }
    with psycopg.connect(z4j_database) as conn:
        rows = conn.execute(
            "SELECT details->>'email', details->>'from' FROM audit_log "
            "WHERE action = 'member.restore_owner' ORDER BY id"
        ).fetchall()
    assert rows == [("stays@example.com", "admin"), ("fresh@example.com", None)]
