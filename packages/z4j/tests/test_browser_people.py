"""The people pages in a real browser against a real brain: forgot password and the reset
link, changing the password, API keys, two-factor enrolment and sign-in with a code, the
accounts page and the audit pages. Screenshots land in tmp_path."""

from __future__ import annotations

import email
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from email import policy
from pathlib import Path
from typing import Any

import pytest
from platformkit.testing.services import free_port
from z4j.actions import users
from z4j.brain import Brain
from z4j.domain import totp
from z4j.settings import Settings
from z4j.startup import open_brain, prepare
from z4j.store import memberships
from z4j.store import users as user_store
from z4j.testing import BrainProcess, wait_for

ADMIN, ADA, PASSWORD = "admin@example.com", "ada@example.com", "a long admin password"
NEW = "a brand new long passphrase"


@pytest.fixture
def brain_server(z4j_database: str, tmp_path: Path) -> Iterator[BrainProcess]:
    server = BrainProcess(z4j_database, tmp_path / "config", free_port(), tmp_path / "brain.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def people(brain_server: BrainProcess) -> AsyncIterator[tuple[Brain, uuid.UUID]]:
    """An administrator owning "default", and Ada, a viewer there."""
    settings = Settings(
        database_url=brain_server.admin_url,  # type: ignore[arg-type]
        config_dir=brain_server.config_dir,
        public_url=brain_server.url,
    )
    brain = await open_brain(await prepare(settings), max_size=2)
    try:
        assert await users.create_first_admin(brain, ADMIN, PASSWORD)
        async with brain.platform_tx() as conn:
            ada = await user_store.create(conn, ADA, await users.hash_in_thread(PASSWORD))
            cur = await conn.execute("SELECT id FROM projects WHERE name = 'default'")
            project = await cur.fetchone()
            assert ada is not None
            assert project is not None
            await memberships.add(conn, ada["id"], project["id"], "viewer")
        yield brain, project["id"]
    finally:
        await brain.pool.close()


async def sign_in(page: Any, url: str, email: str, password: str) -> None:
    await page.goto(f"{url}/login")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", password)
    await page.click("button[type=submit]")


def reset_link(config_dir: Path) -> str | None:
    folder = config_dir / "outbox"
    for path in sorted(folder.iterdir()) if folder.exists() else []:
        body = email.message_from_bytes(path.read_bytes(), policy=policy.default).get_body()
        text = body.get_content() if body is not None else ""
        found = re.search(r"https?://\S+/reset-password/z4jr_[A-Za-z0-9_-]+", text)
        if found:
            return found.group(0)
    return None


async def test_forgot_reset_and_change_the_password(
    brain_server: BrainProcess, people: tuple[Brain, uuid.UUID], page: Any, tmp_path: Path
) -> None:
    url = brain_server.url
    page.set_default_timeout(20_000)
    await page.goto(f"{url}/login")
    await page.click("text=Forgot your password?")
    await page.fill("input[name=email]", ADA)
    await page.click("button[type=submit]")
    await page.get_by_text("is on its way").wait_for()
    await page.screenshot(path=str(tmp_path / "forgot.png"))

    async def mailed() -> str | None:
        return reset_link(brain_server.config_dir)

    link = await wait_for(mailed, within=60)
    assert link is not None
    await page.goto(link)
    await page.get_by_text(ADA).wait_for()
    await page.fill("input[name=password]", NEW)
    await page.fill("input[name=password_again]", NEW)
    await page.screenshot(path=str(tmp_path / "reset.png"))
    await page.click("button[type=submit]")
    await page.get_by_text("Your password is changed").wait_for()
    assert await page.input_value("input[name=email]") == ADA
    await page.fill("input[name=password]", NEW)
    await page.click("button[type=submit]")
    await page.wait_for_url("**/projects")

    await page.click(f"a.who >> text={ADA}")
    await page.wait_for_url("**/account")
    await page.fill("input[name=current_password]", NEW)
    await page.fill("input[name=new_password]", NEW + " again")
    await page.fill("input[name=new_password_again]", NEW + " again")
    await page.get_by_role("button", name="Change password").click()
    await page.get_by_text("Password changed").wait_for()
    await page.screenshot(path=str(tmp_path / "account.png"), full_page=True)


async def test_api_keys_and_two_factor_sign_in(
    brain_server: BrainProcess, people: tuple[Brain, uuid.UUID], page: Any, tmp_path: Path
) -> None:
    url = brain_server.url
    page.set_default_timeout(20_000)
    await sign_in(page, url, ADA, PASSWORD)
    await page.wait_for_url("**/projects")
    await page.goto(f"{url}/account/api-keys")
    await page.fill("input[name=name]", "deploy script")
    await page.get_by_role("button", name="Create key").click()
    token = await page.locator("#api-key-token").inner_text()
    assert token.startswith("z4jk_")
    await page.screenshot(path=str(tmp_path / "api-key-created.png"), full_page=True)
    await page.click("#api-keys >> text=Revoke")
    await page.get_by_text("Key revoked").wait_for()
    assert token not in await page.content()

    await page.goto(f"{url}/account")
    await page.get_by_role("button", name="Set up two-factor sign-in").click()
    secret = await page.locator("#mfa-secret").inner_text()
    assert (await page.locator("#mfa-uri").get_attribute("href") or "").startswith("otpauth://")
    step = int(time.time() // totp.STEP_SECONDS)
    await page.fill("#mfa input[name=code]", totp.code_at(secret, step - 1))
    await page.get_by_role("button", name="Turn on").click()
    codes = (await page.locator("#recovery-codes").inner_text()).split()
    assert len(codes) == 10
    await page.screenshot(path=str(tmp_path / "mfa-on.png"), full_page=True)

    await page.click("text=Sign out")
    await sign_in(page, url, ADA, PASSWORD)
    await page.wait_for_url("**/login/mfa**")
    await page.fill("input[name=code]", "000000" if totp.code_at(secret, step) != "000000" else "1")
    await page.click("button[type=submit]")
    await page.get_by_text("not valid").wait_for()
    await page.screenshot(path=str(tmp_path / "login-mfa.png"))
    await page.fill("input[name=code]", codes[0])
    await page.click("button[type=submit]")
    await page.wait_for_url("**/projects")


async def test_accounts_and_audit_pages(
    brain_server: BrainProcess, people: tuple[Brain, uuid.UUID], page: Any, tmp_path: Path
) -> None:
    _brain, project = people
    url = brain_server.url
    page.set_default_timeout(20_000)
    await sign_in(page, url, ADMIN, PASSWORD)
    await page.wait_for_url("**/projects")
    await page.click("a.tag >> text=admin")
    await page.wait_for_url("**/admin/users")
    row = page.locator("#accounts tr", has_text=ADA)
    await row.locator("text=Disable").click()
    await page.get_by_text(f"{ADA} is disabled").wait_for()
    await page.screenshot(path=str(tmp_path / "accounts.png"), full_page=True)
    await page.locator("#accounts tr", has_text=ADA).locator("text=Enable").click()
    await page.get_by_text(f"{ADA} is enabled").wait_for()

    await page.click("text=Audit log")
    await page.wait_for_url("**/admin/audit")
    await page.get_by_text("user.disable").first.wait_for()
    await page.click("#audit-verify")
    await page.get_by_text("Audit log intact").wait_for()
    await page.fill("input[name=action]", "user.")
    await page.get_by_role("button", name="Filter").click()
    await page.wait_for_url("**action=user.**")
    actions = await page.locator("#audit-rows td code").all_inner_texts()
    assert {a for a in actions if not a.startswith("{")} <= {
        "user.create_admin",
        "user.disable",
        "user.enable",
    }
    export = await page.locator("#audit-export").get_attribute("href")
    assert export is not None
    assert export.startswith("/api/v1/audit/export?")
    await page.screenshot(path=str(tmp_path / "audit.png"), full_page=True)

    await page.goto(f"{url}/projects/{project}/members")
    await page.click("nav.tabs >> text=Audit")
    await page.wait_for_url(f"**/projects/{project}/audit")
    await page.get_by_text("project.create").first.wait_for()
    await page.screenshot(path=str(tmp_path / "project-audit.png"), full_page=True)
