"""Commands end to end: a real brain (``z4j serve``), real Celery workers on Redis and
RabbitMQ, with our agent and with the z4j-celery agent (1.13 from PyPI), over the WebSocket
(long poll: test_commands_long_poll.py). Each command is issued through the REST API as an
operator would, and its effect is checked where it happens: the broker (queue length), the
worker (``inspect``), the task outcomes the agents report, plus the command row and the audit
row in the database.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from z4j.testing import BrainProcess, wait_for

from .command_stack import (
    CommandStack,
    admin_brain,
    check_cancel,
    check_retry,
    command_stack,
)

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

__all__ = ["admin_brain"]  # the module's brain, a fixture


async def check_retry_and_cancel(stack: CommandStack) -> None:
    await check_retry(stack)
    await check_cancel(stack)


async def check_pages(stack: CommandStack, idle: str) -> None:
    """The queues and workers pages read through our agent; z4j-celery offers no such read."""
    base = f"{stack.brain.url}/projects/{stack.project}"
    queues = await stack.api.get(f"{base}/queues")
    workers = await stack.api.get(f"{base}/workers")
    assert queues.status_code == workers.status_code == 200
    if stack.agent.startswith("z4j-celery"):
        assert "No agent of this project offers live reads" in queues.text
        assert stack.node in workers.text  # from the tasks the brain recorded
        return
    row = re.search(rf'<td class="mono">{re.escape(stack.queue)}</td><td>(\d+)</td><td>(\d+)</td>',
                    queues.text)  # fmt: skip
    assert row is not None, queues.text
    assert row.group(2) == "1"  # one consumer: our worker
    assert f'<td class="mono">{idle}</td>' not in queues.text  # nobody consumes it
    node = re.search(
        rf'<td class="mono">{re.escape(stack.node)}</td>\s*<td>prefork</td><td>2</td><td>2</td>',
        workers.text,
    )
    assert node is not None, workers.text
    listed = (await stack.api.get(f"/projects/{stack.project}/workers")).json()
    assert listed["live"] == "succeeded"
    (mine,) = [w for w in listed["items"] if w["worker"] == stack.node]
    assert (mine["pool"], mine["concurrency"], mine["processes"]) == ("prefork", 2, 2)
    listed = (await stack.api.get(f"/projects/{stack.project}/queues")).json()
    (queue,) = [q for q in listed["items"] if q["queue"] == stack.queue]
    assert queue["consumers"] == 1


async def check_queue_and_worker_commands(stack: CommandStack) -> None:
    app = stack.app
    # Purge a queue nobody consumes: the operator sees its depth, types its name.
    idle = f"{stack.queue}-idle"
    for i in range(5):
        app.send_task("cmd.add", (i, i), queue=idle)
    assert stack.queue_length(idle) == 5
    await check_pages(stack, idle)
    body = {"queue": idle, "confirm": idle, "expected_depth": 5}
    done = await stack.command("queues/purge", body)
    assert done["status"] == "succeeded", (done["error"], done["result"])
    assert done["result"]["purged"] == 5
    assert stack.queue_length(idle) == 0
    assert (await stack.audit("queue.purge"))[0]["details"]["queue"] == idle

    # Rate limit on this node, as inspect reports it.
    body = {"task_name": "cmd.add", "rate": "7/m", "worker": stack.node}
    done = await stack.command("rate-limits", body)
    assert done["status"] == "succeeded", (done["error"], done["result"])

    def registered() -> list[str]:
        answer = stack.ask("registered", "rate_limit")
        return list(answer.get(stack.node, []))

    async def limited() -> bool:
        return any("rate_limit=7/m" in r for r in await asyncio.to_thread(registered))

    assert await wait_for(limited, within=30), await asyncio.to_thread(registered)

    # Pool grow and shrink, as inspect stats report the pool.
    def processes() -> int:
        stats = stack.ask("stats")
        return len(stats.get(stack.node, {}).get("pool", {}).get("processes", []))

    async def pool_is(size: int) -> bool:
        return await asyncio.to_thread(processes) == size

    assert await wait_for(lambda: pool_is(2), within=30)
    done = await stack.command("workers/pool", {"worker": stack.node, "delta": 1})
    assert done["status"] == "succeeded", (done["error"], done["result"])
    assert await wait_for(lambda: pool_is(3), within=30), await asyncio.to_thread(processes)
    done = await stack.command("workers/pool", {"worker": stack.node, "delta": -1})
    assert done["status"] == "succeeded", (done["error"], done["result"])
    assert await wait_for(lambda: pool_is(2), within=30), await asyncio.to_thread(processes)

    # Restart: the pool's processes are replaced (prefork replaces each as it goes idle).
    def pids() -> set[int]:
        stats = stack.ask("stats")
        return set(stats.get(stack.node, {}).get("pool", {}).get("processes", []))

    before = await asyncio.to_thread(pids)
    done = await stack.command("workers/restart", {"worker": stack.node})
    assert done["status"] == "succeeded", (done["error"], done["result"])

    async def replaced() -> bool:
        now = await asyncio.to_thread(pids)
        return bool(now - before)

    assert await wait_for(replaced, within=60), (before, await asyncio.to_thread(pids))
    for action in ("task.rate_limit", "worker.pool_grow", "worker.pool_shrink", "worker.restart"):
        assert len(await stack.audit(action)) == 1, action


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("agent", "broker"),
    [("ours", "redis"), ("ours", "rabbitmq"), ("z4j-celery", "redis"), ("z4j-celery", "rabbitmq")],
)
async def test_every_command_reaches_the_worker(
    admin_brain: BrainProcess, tmp_path: Path, agent: str, broker: str
) -> None:
    async with command_stack(admin_brain, agent, broker, tmp_path) as stack:
        await check_retry_and_cancel(stack)
        await check_queue_and_worker_commands(stack)
