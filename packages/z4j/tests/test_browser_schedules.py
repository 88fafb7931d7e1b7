"""The schedules page in a real browser (Debian Chromium) against a real brain: an operator
creates, edits, disables, enables, runs now and deletes a schedule; a bad expression is refused
on the page; a viewer sees the schedules and no button. Screenshots land in tmp_path."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from z4j.brain import Brain
from z4j.testing import BrainProcess

from .test_browser_people import ADA, ADMIN, PASSWORD, brain_server, people, sign_in

__all__ = ["brain_server", "people"]  # fixtures used from the people pages' test


async def test_an_operator_manages_schedules_and_a_viewer_reads_them(
    brain_server: BrainProcess, people: tuple[Brain, uuid.UUID], page: Any, tmp_path: Path
) -> None:
    _brain, project = people
    url = brain_server.url
    page.set_default_timeout(20_000)
    await sign_in(page, url, ADMIN, PASSWORD)
    await page.wait_for_url("**/projects")
    await page.goto(f"{url}/projects/{project}")
    await page.click("nav.tabs >> text=Schedules")
    await page.wait_for_url(f"**/projects/{project}/schedules")
    await page.get_by_text("No schedules yet.").wait_for()

    form = page.locator("#new-schedule")
    await form.locator("input[name=name]").fill("nightly report")
    await form.locator("input[name=task]").fill("reports.nightly")
    await form.locator("select[name=schedule_type]").select_option("cron")
    await form.locator("input[name=expression]").fill("61 2 * * *")
    await form.locator("input[name=timezone]").fill("Europe/Paris")
    await form.locator("input[name=kwargs]").fill('{"to": "ops"}')
    await form.get_by_role("button", name="Create schedule").click()
    await page.get_by_role("alert").get_by_text("61 is outside 0-59").wait_for()
    # the form keeps what was typed
    assert await form.locator("input[name=name]").input_value() == "nightly report"
    await form.locator("input[name=expression]").fill("30 2 * * *")
    await form.get_by_role("button", name="Create schedule").click()
    row = page.locator("tr[data-schedule='nightly report']")
    await row.wait_for()
    assert "Europe/Paris" in await row.inner_text()
    assert "in " in await row.locator(".next-run").inner_text()  # "in 5 h"
    await page.screenshot(path=str(tmp_path / "schedules.png"), full_page=True)

    await row.get_by_role("link", name="nightly report").click()
    await page.wait_for_url("**/schedules/*")
    edit = page.locator("#edit-schedule")
    assert await edit.locator("input[name=kwargs]").input_value() == '{"to": "ops"}'
    await edit.locator("select[name=schedule_type]").select_option("interval")
    await edit.locator("input[name=expression]").fill("15m")
    await edit.get_by_role("button", name="Save").click()
    await page.wait_for_url(f"**/projects/{project}/schedules#s-*")
    row = page.locator("tr[data-schedule='nightly report']")
    assert "15m" in await row.inner_text()

    await row.get_by_role("button", name="Disable").click()
    await page.get_by_role("status").get_by_text("Disabled.").wait_for()
    row = page.locator("tr[data-schedule='nightly report']")
    assert await row.get_by_role("button", name="Run now").count() == 0
    await row.get_by_role("button", name="Enable").click()
    await page.get_by_role("status").get_by_text("Enabled.").wait_for()
    await (
        page.locator("tr[data-schedule='nightly report']")
        .get_by_role("button", name="Run now")
        .click()
    )
    await page.get_by_role("status").get_by_text("next sync").wait_for()
    next_run = page.locator("tr[data-schedule='nightly report'] .next-run")
    assert await next_run.inner_text() == "just now"

    # A viewer sees the schedule and no button that changes it.
    await page.context.clear_cookies()
    await sign_in(page, url, ADA, PASSWORD)
    await page.wait_for_url("**/projects")
    await page.goto(f"{url}/projects/{project}/schedules")
    await page.locator("tr[data-schedule='nightly report']").wait_for()
    assert await page.locator("#schedules button").count() == 0
    assert await page.locator("#new-schedule").count() == 0
    await page.screenshot(path=str(tmp_path / "schedules-viewer.png"), full_page=True)

    # Back as the administrator, delete it.
    await page.context.clear_cookies()
    await sign_in(page, url, ADMIN, PASSWORD)
    await page.wait_for_url("**/projects")
    await page.goto(f"{url}/projects/{project}/schedules")
    await (
        page.locator("tr[data-schedule='nightly report']")
        .get_by_role("button", name="Delete")
        .click()
    )
    await page.get_by_role("status").get_by_text("Deleted.").wait_for()
    await page.get_by_text("No schedules yet.").wait_for()
