"""The ``strataplane`` CLI against the real app: login, the change-set workflow with validation
progress and the approvals still missing, the spec's history, and the commands a newcomer
needs for teams, members, role bindings, enrollment tokens and agents. Commands run in a
worker thread through CliRunner; their HTTP requests reach the app (and its job runner) on the
test's event loop."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from fastapi import FastAPI
from strataplane import cli
from strataplane.actions import teams
from strataplane.cli_spec import Reply
from strataplane.simulate.seed import seed_fleet
from strataplane.testing import BASE_URL, PASSWORD, Seed
from typer.testing import CliRunner
from wirekit.clierrors import CliError

BUNDLE = 'owner = "platform"\nagentKind = "telegraf"\n[config.inputs.cpu.default]\npercpu = true\n'
Run = Callable[..., "asyncio.Future[Result]"]


@pytest.fixture
async def run(sp_app: FastAPI, tmp_path: Path) -> AsyncIterator[Run]:
    loop = asyncio.get_running_loop()
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=sp_app), base_url=BASE_URL)

    def transport(method: str, url: str, body: bytes | None, headers: dict[str, str]) -> Reply:
        sent = http.request(method, url, content=body, headers=headers)
        r = asyncio.run_coroutine_threadsafe(sent, loop).result(timeout=60)
        return Reply(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content)

    runner = CliRunner()

    def invoke(who: str, *args: str, code: int = 0) -> asyncio.Future[Result]:
        env = {"STRATAPLANE_CLI_CONFIG": str(tmp_path / f"{who}.json")}

        async def go() -> Result:
            result = await asyncio.to_thread(
                runner.invoke, cli.app, list(args), obj=transport, env=env
            )
            assert result.exit_code == code, (args, result.output, result.exception)
            return result

        return asyncio.ensure_future(go())

    yield invoke
    await http.aclose()


async def test_cli_round_trip(run: Run, sp_app_seed: Seed, tmp_path: Path) -> None:
    tenant, admin = await sp_app_seed.tenant("alpha")
    admin_ctx = sp_app_seed.ctx(admin, tenant.id)
    await teams.create_team(admin_ctx, "platform", "Platform")
    author = await sp_app_seed.member(admin_ctx, "author")
    approver = await sp_app_seed.member(admin_ctx, "approver")
    for who, user in (("author", author), ("approver", approver)):
        login = await run(
            who,
            "login",
            "--url",
            BASE_URL,
            "--username",
            user.subject,
            "--tenant",
            "alpha",
            "--password",
            PASSWORD,
        )
        assert "logged in" in login.output
        assert stat.S_IMODE((tmp_path / f"{who}.json").stat().st_mode) == 0o600
    assert "CS-1 draft on r1" in (await run("author", "cs", "create", "Add cpu")).output
    source = tmp_path / "cpu.toml"
    source.write_text("# cpu\n" + BUNDLE, encoding="utf-8")
    edit = await run("author", "cs", "edit", "1", "bundles/cpu.toml", str(source))
    assert "SP-1006" in edit.output
    assert "+agentKind" in (await run("author", "cs", "diff", "CS-1")).output
    validated = await run("author", "cs", "validate", "1")
    assert "valid" in validated.output
    assert "invalid" not in validated.output
    assert "in_review" in (await run("author", "cs", "submit", "1")).output
    early = await run("author", "cs", "merge", "1", code=1)
    assert "change_set.not_approved" in early.output
    waiting = (await run("author", "cs", "show", "1")).output
    assert "approvals: not approved yet" in waiting
    assert "1 approval(s) from anyone who may review: missing 1" in waiting
    can = next(line for line in waiting.splitlines() if "can approve:" in line)
    assert approver.display_name in can
    assert author.display_name not in can
    review = await run("approver", "cs", "review", "1", "approve", "-m", "lgtm")
    assert "approved" in review.output
    done = (await run("author", "cs", "show", "1")).output
    assert "approvals: approved" in done
    assert f"approved by: {approver.display_name}" in done
    assert "merged as r2: CS-1: Add cpu" in (await run("author", "cs", "merge", "1")).output
    log = await run("author", "spec", "log", "bundles/cpu.toml")
    assert "r2" in log.output
    assert "CS-1: Add cpu" in log.output
    shown = await run("author", "spec", "show")
    assert "r2: CS-1: Add cpu" in shown.output
    assert "bundles/cpu.toml" in shown.output
    content = await run("author", "spec", "show", "2", "bundles/cpu.toml")
    assert content.output.startswith('agentKind = "telegraf"')
    assert "#" not in content.output
    assert "\n[config.inputs.cpu.default]\n" in content.output  # printed as is, not as markup
    assert "+[config.inputs.cpu.default]" in (await run("author", "spec", "diff", "1", "2")).output
    revert = await run("author", "spec", "revert", "2")
    assert "CS-2 draft on r2: Revert r2: CS-1: Add cpu" in revert.output
    refused = await run("author", "cs", "merge", "2", code=1)
    assert "change_set.invalid_state" in refused.output
    await run("author", "cs", "close", "2")
    broken = tmp_path / "layer.toml"
    broken.write_text('owner = "platform"\nagentKind = "telegraf"\nbundles = [{ name = "gone" }]\n')
    await run("author", "cs", "create", "Broken layer")
    await run("author", "cs", "edit", "3", "layers/base.toml", str(broken))
    invalid = await run("author", "cs", "validate", "3", code=1)
    assert "invalid" in invalid.output
    assert "SP-4001" in invalid.output
    gone = await run("author", "cs", "edit", "3", "layers/none.toml", "--delete", code=1)
    assert "change_set.file_not_found" in gone.output
    stale = await run("author", "cs", "submit", "3", "--if-match", "00" * 32, code=1)
    assert "change_set.digest_mismatch" in stale.output


async def test_cli_people_roles_tokens_and_agents(
    run: Run, sp_app_seed: Seed, tmp_path: Path
) -> None:
    tenant, admin = await sp_app_seed.tenant("beta")
    login = ("--url", BASE_URL, "--username", admin.subject, "--tenant", "beta")
    await run("admin", "login", *login, "--password", PASSWORD)
    assert "team sre" in (await run("admin", "teams", "create", "sre", "SRE")).output
    assert "sre" in (await run("admin", "teams", "list")).output
    added = await run("admin", "members", "add", "oncall", "--password", PASSWORD)
    assert "member oncall" in added.output
    assert "oncall" in (await run("admin", "members", "list")).output
    assert "oncall is in sre" in (await run("admin", "teams", "add", "sre", "oncall")).output
    assert "oncall" in (await run("admin", "teams", "members", "sre")).output
    made = await run(
        "admin", "bindings", "create", "approver", "--user", "oncall", "--owner", "sre"
    )
    assert "approver (owner)" in made.output
    binding_id = made.output.split()[1].rstrip(":")
    assert "approver" in (await run("admin", "bindings", "list")).output
    token = await run(
        "admin",
        "enrollment-tokens",
        "create",
        "canary",
        "--label",
        "canary=true",
        "--max-uses",
        "5",
    )
    assert token.output.strip().splitlines()[-1].startswith("spn_")
    listed = (await run("admin", "enrollment-tokens", "list")).output
    assert "canary" in listed
    assert token.output.strip().splitlines()[-1] not in listed  # only its prefix

    pool = sp_app_seed.services.pool
    canary = await seed_fleet(pool, tenant.id, 1, [{"canary": "true"}], prefix="canary")
    await seed_fleet(pool, tenant.id, 2, [{"env": "prod"}], version="1.38.4", prefix="web")
    every = (await run("admin", "agents", "list")).output
    assert every.count("telegraf") == 3
    only = (await run("admin", "agents", "list", "--label", "canary=true")).output
    assert str(canary[0][0]) in only
    assert "web-" not in only
    old = (await run("admin", "agents", "list", "--version", "1.38.4", "--sync", "updating")).output
    assert old.count("web-") == 2
    assert "canary-" not in old
    assert "canary-000000" in (await run("admin", "agents", "show", str(canary[0][0]))).output
    bad = await run("admin", "agents", "list", "--health", "fine", code=1)
    assert "validation_failed" in bad.output
    nolabel = await run("admin", "agents", "list", "--label", "canary", code=1)
    assert "validation_failed: a label is key=value" in nolabel.output

    await run("admin", "bindings", "delete", binding_id)
    assert "oncall left sre" in (await run("admin", "teams", "remove", "sre", "oncall")).output
    assert "removed oncall" in (await run("admin", "members", "remove", "oncall")).output


async def test_cli_hostile_input_ends_in_one_error_line(run: Run, sp_app_seed: Seed) -> None:
    _, admin = await sp_app_seed.tenant("gamma")
    login = ("--url", BASE_URL, "--username", admin.subject, "--tenant", "gamma")
    await run("admin", "login", *login, "--password", PASSWORD)
    cases = [
        ("teams", "create", "sre\x00", "SRE"),
        ("members", "add", "bob\x00", "--password", PASSWORD),
        ("enrollment-tokens", "create", "web", "--max-uses", str(2**70)),
        ("enrollment-tokens", "create", "web", "--label", "env=prod\x00"),
        ("agents", "list", "--version", "1.39\x00"),
        ("agents", "list", "--label", "k=" + "v" * 300),
        ("agents", "show", str(2**70)),
        ("cs", "show", str(2**70)),
        ("bindings", "create", "approver", "--user", "nobody\x00"),
    ]
    for args in cases:
        result = await run("admin", *args, code=1)
        if isinstance(result.exception, CliError):  # the entry point prints it as one line
            continue
        lines = result.output.strip().splitlines()
        assert lines[0].startswith("error: "), (args, result.output)
        assert "Traceback" not in result.output
