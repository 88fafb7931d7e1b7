"""The admin CLI end to end: tenants, workspaces, users, tokens and policies, through CliRunner
against a real database. A token is printed once, only its SHA-256 is stored, and after
revocation or expiry it no longer verifies."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agentbus import db
from agentbus.cli import app as cli
from agentbus.console.sessions import use_link
from agentbus.errors import AgentBusError, TokenExpired, TokenRevoked
from agentbus.gateway.actions.signing import ensure_signing_key
from agentbus.keys import load_or_create_keyring
from agentbus.policies.model import DEFAULT_NAME
from agentbus.store.integration_tokens import VerifiedToken, verify_integration_token
from typer.testing import CliRunner, Result

TOKEN = re.compile(r"ab_(?:live|test)_[A-Za-z0-9]{40}")


class Admin:
    def __init__(self, url: str, keyring: Path) -> None:
        self.url = url
        self.env = {"AGENTBUS_DATABASE_URL": url, "AGENTBUS_KEYRING_PATH": str(keyring)}
        self.runner = CliRunner()

    def __call__(self, *args: str, ok: bool = True) -> Result:
        result = self.runner.invoke(cli, ["admin", *args], env=self.env)
        assert (result.exit_code == 0) == ok, result.output
        return result

    def json(self, *args: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = json.loads(self(*args, "--json").output)
        return rows


def first_id(prefix: str, text: str) -> str:
    match = re.search(rf"{prefix}_[0-9a-f]{{32}}", text)
    assert match is not None, text
    return match.group(0)


def verify(url: str, token: str) -> VerifiedToken | AgentBusError:
    async def go() -> VerifiedToken | AgentBusError:
        pool = await db.open_app_pool(url, max_size=1)
        try:
            return await verify_integration_token(pool, token, ip="192.0.2.7")
        except AgentBusError as exc:
            return exc
        finally:
            await pool.close()

    return asyncio.run(go())


@pytest.fixture
def admin(agentbus_db: str, tmp_path: Path) -> Admin:
    return Admin(agentbus_db, tmp_path / "keyring.json")


def test_tokens_create_list_revoke(admin: Admin) -> None:
    out = admin(
        "tenants",
        "create",
        "acme",
        "--name",
        "Acme Corp",
        "--plan",
        "business",
        "--owner-email",
        "ops@acme.example",
    ).output
    tenant, owner = first_id("ten", out), first_id("usr", out)
    assert len(TOKEN.findall(out)) == 1  # the bootstrap token, shown once
    assert (Path(admin.env["AGENTBUS_KEYRING_PATH"]).stat().st_mode & 0o777) == 0o600
    ws = first_id(
        "ws",
        admin("workspaces", "create", "--tenant", tenant, "platform", "--name", "Platform").output,
    )
    created = admin(
        "tokens",
        "create",
        "--tenant",
        tenant,
        "--owner",
        owner,
        "--name",
        "ci-runner",
        "--env",
        "test",
        "--workspace",
        ws,
        "--scope",
        "send",
        "--scope",
        "receive",
        "--expires-in-days",
        "30",
    ).output
    [token] = TOKEN.findall(created)
    assert token.startswith("ab_test_")
    assert created.count(token) == 1
    token_id = first_id("tok", created)

    listed = {row["id"]: row for row in admin.json("tokens", "list", "--tenant", tenant)}
    row = listed[token_id]
    assert (row["prefix"], row["last4"]) == (token[:14], token[-4:])
    assert row["scopes"] == ["send", "receive"]
    assert row["workspace_id"] == ws
    assert token not in json.dumps(listed)
    assert "token_hash" not in row
    with psycopg.connect(admin.url) as conn:
        stored = conn.execute(
            "SELECT token_hash, to_jsonb(t)::text FROM integration_tokens t WHERE prefix = %s",
            (token[:14],),
        ).fetchone()
    assert stored is not None
    assert bytes(stored[0]) == hashlib.sha256(token.encode()).digest()
    assert token not in stored[1]
    assert token[8:] not in stored[1]

    verified = verify(admin.url, token)
    assert isinstance(verified, VerifiedToken)
    assert verified.scopes == {"send", "receive"}

    admin("tokens", "revoke", "--tenant", tenant, token_id, "--reason", "leaked")
    assert token_id not in {r["id"] for r in admin.json("tokens", "list", "--tenant", tenant)}
    revoked = {
        r["id"]: r for r in admin.json("tokens", "list", "--tenant", tenant, "--include-revoked")
    }[token_id]
    assert revoked["revoked_at"]
    assert revoked["revoked_reason"] == "leaked"
    assert isinstance(verify(admin.url, token), TokenRevoked)
    logged = admin.json("audit", "--tenant", tenant)
    assert [(r["action"], r["actor_type"]) for r in reversed(logged)] == [
        ("tenant.create", "platform"),
        ("user.create", "platform"),
        ("policy.create", "platform"),  # the default policy
        ("token.create", "platform"),
        ("workspace.create", "platform"),
        ("token.create", "platform"),
        ("token.revoke", "platform"),
    ]
    [revoke] = admin.json("audit", "--tenant", tenant, "--action", "token.revoke")
    assert revoke["target_id"] == token_id
    assert [r["action"] for r in admin.json("audit", "--tenant", tenant, "--target", ws)] == [
        "workspace.create"
    ]


def test_expired_token_stops_verifying(admin: Admin) -> None:
    out = admin(
        "tenants", "create", "beta", "--name", "Beta", "--owner-email", "o@beta.example"
    ).output
    [token] = TOKEN.findall(out)
    assert isinstance(verify(admin.url, token), VerifiedToken)
    with psycopg.connect(admin.url) as conn:
        conn.execute("UPDATE integration_tokens SET expires_at = now() - interval '1 second'")
    assert isinstance(verify(admin.url, token), TokenExpired)


def test_listing_users_workspaces_tenants_and_suspending(admin: Admin) -> None:
    tenant = first_id("ten", admin("tenants", "create", "gamma", "--name", "Gamma").output)
    admin("users", "create", "--tenant", tenant, "--email", "Dev@Gamma.example", "--role", "admin")
    admin("users", "create", "--tenant", tenant, "--email", "dev@gamma.example", ok=False)
    users = admin.json("users", "list", "--tenant", tenant)
    assert [(u["email"], u["tenant_role"]) for u in users] == [("dev@gamma.example", "admin")]
    admin("workspaces", "create", "--tenant", tenant, "one", "--name", "One")
    limit = admin("workspaces", "create", "--tenant", tenant, "two", "--name", "Two", ok=False)
    assert "AB-5006" in limit.output  # starter allows one workspace
    assert [w["slug"] for w in admin.json("workspaces", "list", "--tenant", tenant)] == ["one"]
    assert "gamma" in admin("tenants", "list").output
    admin("tenants", "suspend", tenant)
    again = admin("tenants", "suspend", tenant, ok=False)
    assert "AB-8008" in again.output
    assert [t["status"] for t in admin.json("tenants", "list")] == ["suspended"]
    admin("tenants", "resume", tenant, "--reason", "paid")
    assert "AB-8008" in admin("tenants", "resume", tenant, ok=False).output
    assert [t["status"] for t in admin.json("tenants", "list")] == ["active"]
    bad = admin.runner.invoke(
        cli, ["admin", "tokens", "list", "--tenant", "ten_XYZ"], env=admin.env
    )
    assert bad.exit_code == 2
    assert "expected a ten_ id" in bad.output


def test_republishing_a_tenants_waiting_messages(admin: Admin) -> None:
    tenant = first_id("ten", admin("tenants", "create", "delta", "--name", "Delta").output)
    said = admin("tenants", "republish", tenant, "--reason", "NATS lost its data").output
    assert f"0 waiting messages of {tenant}" in said
    rows = admin.json("audit", "--tenant", tenant)
    [row] = [r for r in rows if r["action"] == "tenant.republish"]
    assert row["details"] == {"reason": "NATS lost its data", "messages": 0}


def test_a_keyring_that_did_not_wrap_the_databases_keys_is_refused(
    agentbus_db: str, tmp_path: Path
) -> None:
    """Creating a tenant wraps its data key with the keyring: with the wrong one the tenant's
    payloads would be unreadable to the gateway. The CLI refuses first and creates nothing."""

    async def first_key() -> None:
        async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as conn:
            await ensure_signing_key(conn, load_or_create_keyring(tmp_path / "set-up.json"))

    asyncio.run(first_key())
    wrong = Admin(agentbus_db, tmp_path / "other.json")
    load_or_create_keyring(tmp_path / "other.json")
    refused = wrong("tenants", "create", "acme", "--name", "Acme", "--owner-email",
                    "ops@acme.example", ok=False)  # fmt: skip
    assert "error: keyring.mismatch: " in refused.output
    assert "restore the keyring.json" in " ".join(refused.output.split())
    right = Admin(agentbus_db, tmp_path / "set-up.json")
    right("tenants", "create", "acme", "--name", "Acme", "--owner-email", "ops@acme.example")


def test_an_operator_restores_an_owner_to_a_locked_out_tenant(admin: Admin) -> None:
    """A tenant whose only owner is disabled (behind the API's back): the operator makes another
    user of the tenant an active owner, audited as the operator's doing."""
    tenant = first_id("ten", admin("tenants", "create", "delta", "--name", "Delta").output)
    out = admin("users", "create", "--tenant", tenant, "--email", "ops@delta.example").output
    user = first_id("usr", out)
    with psycopg.connect(admin.url) as conn:
        conn.execute("UPDATE users SET status = 'disabled'")

    admin("users", "restore-owner", "--tenant", tenant, user)

    [restored] = admin.json("users", "list", "--tenant", tenant)
    assert (restored["id"], restored["tenant_role"], restored["status"]) == (
        user,
        "owner",
        "active",
    )
    audit = admin("audit", "--tenant", tenant, "--json").output
    entry = next(row for row in json.loads(audit) if row["action"] == "user.update")
    assert entry["actor_type"] == "platform", entry
    assert admin("users", "restore-owner", "--tenant", tenant, "usr_" + "0" * 32, ok=False)


def test_a_console_link_for_an_owner_signs_in_once(admin: Admin) -> None:
    out = admin(
        "tenants", "create", "epsilon", "--name", "Epsilon", "--owner-email", "o@eps.example"
    ).output
    tenant = first_id("ten", out)
    out = admin("users", "console-link", "--tenant", tenant, "o@eps.example",
                "--base-url", "https://bus.example/").output  # fmt: skip
    prefix = "https://bus.example/console/sign-in?link="
    assert out.startswith(prefix)
    link = out.strip().removeprefix(prefix)

    async def go() -> tuple[str | None, str | None]:
        pool = await db.open_app_pool(admin.url, max_size=1)
        try:
            return await use_link(pool, link), await use_link(pool, link)
        finally:
            await pool.close()

    first, second = asyncio.run(go())
    assert first is not None
    assert second is None  # a link works once
    refused = admin("users", "console-link", "--tenant", tenant, "nobody@eps.example", ok=False)
    assert "AB-8002" in refused.output or "not_found" in refused.output


def test_policies_from_the_operators_side(admin: Admin, tmp_path: Path) -> None:
    out = admin("tenants", "create", "acme", "--name", "Acme", "--owner-email", "o@acme.example")
    tenant = first_id("ten", out.output)
    [default] = admin.json("policies", "list", "--tenant", tenant)
    assert (default["name"], default["version"], default["enabled"]) == (DEFAULT_NAME, 1, True)

    text = tmp_path / "cap.cedar"
    text.write_text("forbid(principal, action, resource) when { context.size_bytes > 4096 };\n")
    created = admin("policies", "create", "--tenant", tenant, "size-cap", "--file", str(text))
    policy = first_id("pol", created.output)
    text.write_text("forbid(principal, action, resource) when { context.sizes > 1 };\n")
    refused = admin(
        "policies", "version", "--tenant", tenant, policy, "--file", str(text), ok=False
    )
    assert "AB-4003" in refused.output or "policy_invalid" in refused.output, refused.output
    text.write_text("forbid(principal, action, resource) when { context.size_bytes > 1024 };\n")
    assert (
        "version 2"
        in admin("policies", "version", "--tenant", tenant, policy, "--file", str(text)).output
    )
    admin("policies", "disable", "--tenant", tenant, policy)
    listed = {p["name"]: p for p in admin.json("policies", "list", "--tenant", tenant)}
    assert (listed["size-cap"]["version"], listed["size-cap"]["enabled"]) == (2, False)
    assert listed["size-cap"]["versions"] == 2

    shown = admin("policies", "show", "--tenant", tenant, policy).output
    assert "context.size_bytes > 4096" in shown
    ran = json.loads(admin(
        "policies", "dry-run", "--tenant", tenant, "--file", str(text), "--json"
    ).output)  # fmt: skip
    assert ran == {"replayed": 0, "refused": []}
    assert "action send, request_task, accept_task, read" in admin("policies", "schema").output

    actions = [row["action"] for row in admin.json("audit", "--tenant", tenant)]
    for action in ("policy.create", "policy.version", "policy.disable"):
        assert action in actions
