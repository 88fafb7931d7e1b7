"""``z4j schedule ...`` against a real brain: create, list, update, disable, enable, run now and
delete, naming the schedule by name; the brain's refusals end the command with their code."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from z4j.testing import BrainProcess

from .test_e2e_celery import ADMIN_EMAIL, ADMIN_PASSWORD, create_admin, signed_in


def z4j(brain: BrainProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"Z4J_URL": brain.url, "Z4J_EMAIL": ADMIN_EMAIL,
                        "Z4J_PASSWORD": ADMIN_PASSWORD, "COLUMNS": "200"}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "z4j.cli", "schedule", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


async def test_the_schedule_commands(brain_server: BrainProcess) -> None:
    await create_admin(brain_server)
    project = str((await brain_server.new_agent())["project_id"])

    async def run(*args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(z4j, brain_server, *args)

    made = await run("create", project, "cleanup", "app.cleanup", "0 3 * * mon-fri",
                     "--kwargs", '{"days": 7}', "--timezone", "Europe/Berlin")  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert "cron 0 3 * * mon-fri [Europe/Berlin], enabled" in made.stdout
    bad = await run("create", project, "broken", "app.x", "every day", "--type", "interval")
    assert bad.returncode != 0
    assert "validation_failed" in bad.stdout + bad.stderr

    changed = await run("update", project, "cleanup", "--type", "interval", "--expression", "6h",
                        "--skip-if-running")  # fmt: skip
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "interval 6h" in changed.stdout
    off = await run("disable", project, "cleanup")
    assert "disabled, next run -" in off.stdout, off.stdout + off.stderr
    refused = await run("run", project, "cleanup")
    assert refused.returncode != 0
    assert "schedule.disabled" in refused.stdout + refused.stderr
    assert (await run("enable", project, "cleanup")).returncode == 0
    assert (await run("run", project, "cleanup")).returncode == 0

    listed = await run("list", project)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "cleanup" in listed.stdout
    assert "app.cleanup" in listed.stdout
    async with signed_in(brain_server) as http:
        [schedule] = (await http.get(f"/projects/{project}/schedules")).json()
    assert schedule["kwargs"] == {"days": 7}
    assert schedule["skip_if_running"] is True

    gone = await run("delete", project, "cleanup")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    missing = await run("delete", project, "cleanup")
    assert "schedule.not_found" in missing.stdout + missing.stderr
