"""The account pages as forms: forgot password, the reset link's page, changing a password."""

from __future__ import annotations

import email
import re
from email import policy

import httpx
from z4j.brain import Brain
from z4j.testing import wait_for

from .conftest import PASSWORD, Seed
from .hostile import assert_form_refused, form_token

NEW = "a fresh and long passphrase"


def _reset_tokens(brain: Brain) -> list[str]:
    folder = brain.settings.config_dir / "outbox"
    found = []
    for path in sorted(folder.iterdir()) if folder.exists() else []:
        body = email.message_from_bytes(path.read_bytes(), policy=policy.default).get_body()
        assert body is not None
        match = re.search(r"/reset-password/(z4jr_[A-Za-z0-9_-]+)", body.get_content())
        if match:
            found.append(match.group(1))
    return found


async def test_forgot_reset_and_change_through_the_forms(
    seed: Seed, brain: Brain, client: httpx.AsyncClient
) -> None:
    await seed.user("ada@example.com")
    login = await client.get("/login")
    assert 'href="/forgot-password"' in login.text
    page = await client.get("/forgot-password")
    sent = await client.post(
        "/forgot-password", data={"email": "ada@example.com", "csrf_token": form_token(page.text)}
    )
    assert sent.status_code == 200
    assert "is on its way" in sent.text

    async def mailed() -> list[str]:
        return _reset_tokens(brain)

    [token] = await wait_for(mailed, within=60)
    reset = await client.get(f"/reset-password/{token}")
    assert "ada@example.com" in reset.text
    csrf = form_token(reset.text)
    differ = await client.post(
        f"/reset-password/{token}",
        data={"password": NEW, "password_again": NEW + "x", "csrf_token": csrf},
    )
    assert differ.status_code == 422
    done = await client.post(
        f"/reset-password/{token}",
        data={"password": NEW, "password_again": NEW, "csrf_token": csrf},
    )
    assert done.status_code == 303
    assert done.headers["location"].startswith("/login?reset=1")
    assert (await client.get(f"/reset-password/{token}")).status_code == 404
    await assert_form_refused(
        client, "/forgot-password", {"email": "a@example.com", "csrf_token": csrf}
    )
    await assert_form_refused(
        client, f"/reset-password/{token}", {"password": NEW, "csrf_token": csrf}
    )


async def test_the_account_page_changes_the_password(seed: Seed) -> None:
    await seed.user("ada@example.com")
    async with seed.signed_in("ada@example.com") as http:
        page = await http.get("/account")
        assert page.status_code == 200
        csrf = form_token(page.text)
        wrong = await http.post(
            "/account/password",
            data={"current_password": "nope", "new_password": NEW, "new_password_again": NEW,
                  "csrf_token": csrf},
        )  # fmt: skip
        assert wrong.status_code == 422
        assert "current password is not right" in wrong.text
        ok = await http.post(
            "/account/password",
            data={"current_password": PASSWORD, "new_password": NEW, "new_password_again": NEW,
                  "csrf_token": csrf},
        )  # fmt: skip
        assert ok.status_code == 200
        assert "Password changed" in ok.text
        await assert_form_refused(
            http, "/account/password", {"current_password": NEW, "csrf_token": csrf}
        )
