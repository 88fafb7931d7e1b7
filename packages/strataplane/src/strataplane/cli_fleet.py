"""The fleet's commands: ``explain``, ``simulate telegraf`` and ``bench fleet``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID

import typer

simulate_app = typer.Typer(help="Simulated agents against a running server.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks printing one JSON object per line.", no_args_is_help=True)


async def _explain(admin_url: str, tenant: str, agent: str, agent_url: str) -> dict[str, Any]:
    from platformkit.db.pool import open_pool
    from platformkit.db.scope import tenant_transaction, transaction
    from pydantic import SecretStr

    from strataplane import db
    from strataplane.actions.context import Services, system_ctx
    from strataplane.actions.fleet_explain import explain_agent
    from strataplane.settings import Settings
    from strataplane.store import fleet_agents, tenants

    pool = await open_pool(db.app_url(admin_url), min_size=1, max_size=2)
    try:
        async with transaction(pool) as conn:  # tenant rows are installation-wide
            row = await tenants.get_tenant_by_slug(conn, tenant)
        if row is None:
            raise typer.BadParameter(f"no tenant {tenant!r}")
        async with tenant_transaction(pool, db.SCOPE, row.id) as conn:
            try:
                agent_id = UUID(agent)
            except ValueError:
                found = await fleet_agents.find_agent(conn, row.id, "telegraf", agent)
                if found is None:
                    raise typer.BadParameter(f"no agent {agent!r} in {tenant}") from None
                agent_id = found.id
        services = Services(pool, Settings(database_url=SecretStr(admin_url)))
        return await explain_agent(system_ctx(services, row.id), agent_id, agent_url=agent_url)
    finally:
        await pool.close()


def explain(
    agent: Annotated[str, typer.Argument(help="Agent id or external id (Telegraf instance_id).")],
    tenant: Annotated[str, typer.Option(help="Tenant slug.")],
    database_url: Annotated[str | None, typer.Option(envvar="STRATAPLANE_DATABASE_URL")] = None,
) -> None:
    """Why an agent gets its configuration: Layers, the source of every value, the render."""
    from strataplane import db
    from strataplane.agents.settings import FleetSettings

    url = db.resolve_admin_url(database_url)
    out = asyncio.run(_explain(url, tenant, agent, FleetSettings().agent_url))
    sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")


@simulate_app.command("telegraf")
def simulate_telegraf(
    url: Annotated[str, typer.Option(help="Base URL of the server.")],
    credentials: Annotated[Path, typer.Option(help="JSON \\[\\[instance_id, spt_token], ...].")],
    agents: Annotated[int, typer.Option(help="Instances to run (first N credentials).")] = 0,
    watch_interval: Annotated[float, typer.Option(help="--config-url-watch-interval, s.")] = 10.0,
    duration: Annotated[float, typer.Option(help="Seconds to run.")] = 60.0,
    connections: Annotated[int, typer.Option(help="Keep-alive connections shared.")] = 200,
    report_every: Annotated[float, typer.Option(help="Seconds per JSON report line.")] = 5.0,
    version: Annotated[str, typer.Option(help="Telegraf version to report.")] = "1.39.1",
) -> None:
    """Run N simulated Telegraf instances; print a JSON line of rates and latency per window."""
    import uvloop
    from platformkit.gc_thresholds import tune_for_serving

    from strataplane.simulate.fleet import run_fleet

    tune_for_serving()  # thousands of long-lived simulated agents: the same pauses as a server
    pairs = [(str(i), str(t)) for i, t in json.loads(credentials.read_text())]
    pairs = pairs[:agents] if agents else pairs
    asyncio.run(
        run_fleet(
            url,
            pairs,
            watch_interval=watch_interval,
            duration=duration,
            version=version,
            connections=connections,
            report_every=report_every,
        ),
        # the simulator shares the machine with the server it measures: uvloop's transports
        # cost it about half the CPU per request of asyncio's
        loop_factory=uvloop.new_event_loop,
    )


@bench_app.command("fleet")
def bench_fleet(
    agents: Annotated[int, typer.Option(help="Simulated Telegraf instances.")] = 10_000,
    interval: Annotated[float, typer.Option(help="HEAD watch interval, s.")] = 10.0,
    heartbeat_interval: Annotated[
        float | None,
        typer.Option(
            help="outputs.heartbeat interval, s (default: half the watch interval; a first "
            "heartbeat comes one interval after a reload)."
        ),
    ] = None,
    workers: Annotated[int, typer.Option(help="Server worker processes.")] = 1,
    connections: Annotated[int, typer.Option(help="Simulator keep-alive connections.")] = 500,
    database_url: Annotated[str | None, typer.Option(envvar="STRATAPLANE_DATABASE_URL")] = None,
) -> None:
    """Serve, seed a fleet, poll it from a simulator process, merge, and time the apply."""
    from strataplane.simulate.bench_run import run

    for line in run(agents, interval, workers, connections, database_url, heartbeat_interval):
        sys.stdout.write(json.dumps(line) + "\n")


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
    app.add_typer(simulate_app, name="simulate")
    app.add_typer(bench_app, name="bench")
