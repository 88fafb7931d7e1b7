"""The Queues and Workers pages and a task's Retry and Cancel buttons in Chromium, against a
real brain and a real worker with our agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from z4j.testing import BrainProcess, wait_for

from .command_stack import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    admin_brain,
    command_stack,
)

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

__all__ = ["admin_brain"]  # the module's brain, a fixture


async def _until(page: Any, selector: str, text: str | None = None) -> None:
    """Reload until ``selector`` (holding ``text``, if given) is on the page."""

    async def shown() -> bool:
        await page.reload()
        found = page.locator(selector)
        if text is not None:
            found = found.filter(has_text=text)
        return bool(await found.count())

    assert await wait_for(shown, within=90, interval=0.5), (selector, text, await page.content())


@pytest.mark.timeout(300)
async def test_queues_workers_and_task_actions_in_a_browser(
    admin_brain: BrainProcess, tmp_path: Path, page: Any
) -> None:
    """Chromium against a real brain and a real worker with our agent: the Queues and Workers
    pages show what the agent reads from the worker, and a task's Retry and Cancel buttons act
    on the worker."""
    async with command_stack(admin_brain, "ours", "redis", tmp_path) as stack:
        original = await stack.task(stack.app.send_task("cmd.add", (5, 6)).id, "succeeded")
        base = f"{admin_brain.url}/projects/{stack.project}"
        page.set_default_timeout(60_000)
        await page.set_viewport_size({"width": 1280, "height": 860})
        await page.goto(f"{base}/queues")
        await page.fill("input[name=email]", ADMIN_EMAIL)
        await page.fill("input[name=password]", ADMIN_PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(f"{base}/queues")
        row = page.locator("table.grid tbody tr").filter(has_text=stack.queue)
        cells = await row.locator("td").all_inner_texts()
        assert (cells[0], cells[2]) == (stack.queue, "1"), cells  # one consumer: our worker
        assert not await page.locator("p.alert").count()  # the live read answered
        await page.screenshot(path=str(tmp_path / "queues.png"), full_page=True)

        await page.goto(f"{base}/workers")
        row = page.locator("table.grid tbody tr").filter(has_text=stack.node)
        cells = await row.locator("td").all_inner_texts()
        assert cells[:4] == [stack.node, "prefork", "2", "2"], cells
        assert int(cells[6]) >= 1  # the task above, as the brain recorded it
        await page.screenshot(path=str(tmp_path / "workers.png"), full_page=True)

        # Retry from the task's page: the new task runs on the worker and is linked both ways.
        await page.goto(f"{base}/tasks/{original['id']}")
        await page.click("form[action$='/retry'] button")
        await page.wait_for_url("**command=**")
        await _until(page, "dl.fields dt", "Retried as")
        assert "retry_task" in await page.locator("main").inner_text()
        await page.click("dl.fields dd a")
        await page.locator("dl.fields dt", has_text="Retry of").wait_for()
        await _until(page, ".task-title .badge.state-succeeded")
        (retried,) = await stack.audit("task.retry")
        assert retried["target_id"] == original["id"]
        await page.screenshot(path=str(tmp_path / "retried.png"), full_page=True)

        # Cancel with terminate from the page of a running task: the worker stops it.
        running = stack.app.send_task("cmd.sleep", (120,)).id
        started = await stack.task(running, "started")
        await page.goto(f"{base}/tasks/{started['id']}")
        await page.check("input[name=terminate]")
        await page.click("form[action$='/cancel'] button")
        await page.wait_for_url("**command=**")
        await _until(page, ".task-title .badge.state-cancelled")
        await stack.task(running, "cancelled")
        (cancelled,) = await stack.audit("task.cancel")
        assert cancelled["details"]["terminate"] is True
        await page.screenshot(path=str(tmp_path / "cancelled.png"), full_page=True)
