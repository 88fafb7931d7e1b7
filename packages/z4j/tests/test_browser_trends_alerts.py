"""The trends and alerts pages in a real browser against a real brain, with the alert rules
CLI talking to the same brain: charts drawn, narrowed to one task name; a rule created from
the CLI and one from the page, disabled there; a task page with its retries. Screenshots land
in tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from platformkit.testing.services import free_port
from z4j.ingest.fold import scoped_id
from z4j.testing import BrainProcess

from .test_browser_dashboard import EMAIL, PASSWORD, seed_brain


@pytest.fixture
def brain_server(z4j_database: str, tmp_path: Path) -> Iterator[BrainProcess]:
    server = BrainProcess(z4j_database, tmp_path / "config", free_port(), tmp_path / "brain.log")
    server.start()
    yield server
    server.stop()


def cli(server: BrainProcess, *args: str) -> str:
    env = {**os.environ, "Z4J_URL": server.url, "Z4J_EMAIL": EMAIL, "Z4J_PASSWORD": PASSWORD,
           "COLUMNS": "200"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "z4j.cli", "alerts", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def test_trends_alerts_and_the_cli(
    brain_server: BrainProcess, page: Any, tmp_path: Path
) -> None:
    brain, project, _agent = await seed_brain(brain_server)
    await brain.pool.close()
    pay = scoped_id(project, "pay-1")

    made = cli(brain_server, "create", str(project), "--name", "payments failing",
               "--kind", "failure_rate", "--threshold", "10", "--queue", "payments",
               "--to", "ops@example.com")  # fmt: skip
    assert "created" in made
    assert "payments failing" in cli(brain_server, "list", str(project))

    url = brain_server.url
    page.set_default_timeout(20_000)
    await page.goto(f"{url}/login")
    await page.fill("input[name=email]", EMAIL)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_url("**/projects")

    await page.goto(f"{url}/projects/{project}/trends?window=1h")
    await page.locator("#chart-throughput svg").wait_for()
    drawn = page.locator('#chart-throughput rect.bar:not([height="0.0"])')
    assert await drawn.count() >= 10  # one task a minute for half an hour
    assert await page.locator("figure.chart svg").count() == 3
    assert await page.locator("#trend-finished").inner_text() == "31"
    await page.screenshot(path=str(tmp_path / "trends.png"), full_page=True)
    await page.click("#by-name >> text=shop.mail.send_receipt")
    await page.wait_for_url("**name=shop.mail.send_receipt**")
    assert await page.locator("#trend-scope").inner_text() == "shop.mail.send_receipt"
    assert await page.locator("#trend-failed").inner_text() == "0"
    assert await page.locator("#chart-runtime path.s-p95").count() == 1
    await page.click("nav.windows >> text=24h")
    await page.wait_for_url("**window=24h**")
    await page.screenshot(path=str(tmp_path / "trends-one-task.png"), full_page=True)

    await page.click("nav.tabs >> text=Alerts")
    await page.wait_for_url("**/alerts")
    await page.locator("#alert-rules >> text=payments failing").wait_for()
    form = page.locator("#new-rule form")
    await form.locator("input[name=name]").fill("reports backlog")
    await form.locator("select[name=kind]").select_option("queue_depth")
    await form.locator("input[name=threshold]").fill("100")
    await form.locator("input[name=queue]").fill("reports")
    await form.get_by_role("button", name="Create rule").click()
    await page.get_by_text("Rule reports backlog created.").wait_for()
    row = page.locator('tr[data-rule="reports backlog"]')
    await row.get_by_role("button", name="Disable").click()
    await page.get_by_text("Rule reports backlog disabled.").wait_for()
    assert await page.locator('tr[data-rule="reports backlog"] >> text=disabled').count() == 1
    await page.screenshot(path=str(tmp_path / "alerts.png"), full_page=True)
    assert "reports backlog" in cli(brain_server, "list", str(project))

    await page.goto(f"{url}/projects/{project}/tasks/{pay}")
    await page.locator("#task-retries li").first.wait_for()
    assert "UTC" in await page.locator("#task-retries li").first.inner_text()
    await page.screenshot(path=str(tmp_path / "task-retries.png"), full_page=True)
