"""``strataplane secrets ...`` against the real app: set from standard input, rotate, list,
show, disable, deliveries; the value never appears in any output."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from fastapi import FastAPI
from strataplane import cli
from strataplane.actions import tokens
from strataplane.cli_spec import Reply
from strataplane.simulate.seed import publish
from strataplane.testing import BASE_URL, Seed
from typer.testing import CliRunner

VALUE = "s3cr3t-from-stdin"
Run = Callable[..., "asyncio.Future[Result]"]


@pytest.fixture
async def run(sp_app: FastAPI, sp_app_seed: Seed) -> AsyncIterator[Run]:
    tenant, admin = await sp_app_seed.tenant()
    files = {"secrets/API_KEY.toml": 'owner = "ops"\n\n[grant]\n'}
    await publish(sp_app.state.services.pool, tenant.id, files)
    token = (await tokens.create_token(sp_app_seed.ctx(admin, tenant.id), "cli")).plaintext
    loop = asyncio.get_running_loop()
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=sp_app), base_url=BASE_URL)

    def transport(method: str, url: str, body: bytes | None, headers: dict[str, str]) -> Reply:
        sent = http.request(method, url, content=body, headers=headers)
        r = asyncio.run_coroutine_threadsafe(sent, loop).result(timeout=60)
        return Reply(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content)

    runner = CliRunner()
    env = {"STRATAPLANE_URL": BASE_URL, "STRATAPLANE_TOKEN": token}

    def invoke(*args: str, code: int = 0, stdin: str | None = None) -> asyncio.Future[Result]:
        async def go() -> Result:
            result = await asyncio.to_thread(
                runner.invoke, cli.app, list(args), obj=transport, env=env, input=stdin
            )
            assert result.exit_code == code, (args, result.output, result.exception)
            return result

        return asyncio.ensure_future(go())

    yield invoke
    await http.aclose()


async def test_secrets_commands(run: Run, tmp_path: Path) -> None:
    outputs = []
    refused = await run("secrets", "rotate", "API_KEY", stdin=VALUE + "\n", code=1)
    assert "secret.no_value" in refused.output
    made = await run("secrets", "set", "API_KEY", "--comment", "first", stdin=VALUE + "\n")
    assert "version 1 is current" in made.output
    rotated = await run("secrets", "rotate", "API_KEY", stdin=VALUE + "-2\n")
    assert "version 2 is current" in rotated.output
    listed = await run("secrets", "list")
    assert "API_KEY" in listed.output
    assert "v2" in listed.output
    await run("secrets", "disable", "API_KEY", "2")
    shown = await run("secrets", "show", "API_KEY")
    assert "current v1" in shown.output
    deliveries = await run("secrets", "deliveries", "API_KEY")
    missing = await run("secrets", "show", "NOPE", code=1)
    assert "secret.not_found" in missing.output
    outputs += [refused, made, rotated, listed, shown, deliveries, missing]
    assert all(VALUE not in r.output for r in outputs)


async def test_audit_sink_commands(run: Run) -> None:
    made = await run(
        "audit-sinks",
        "add",
        "webhook",
        "https://siem.example.com/in",
        "--credential-stdin",
        stdin="Bearer siem-credential\n",
    )
    assert "audit sink" in made.output
    listed = await run("audit-sinks", "list")
    assert "webhook" in listed.output
    sink_id = made.output.split()[2]
    shown = await run("audit-sinks", "show", sink_id)
    assert '"has_credential": true' in shown.output
    await run("audit-sinks", "remove", sink_id)
    for result in (made, listed, shown):
        assert "siem-credential" not in result.output
