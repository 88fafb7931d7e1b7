"""The fleet's commands: ``explain``, ``simulate telegraf``, ``simulate vector`` and
``bench fleet``."""

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


KINDS = ("telegraf", "vector", "elastic-agent")


async def _explain(
    admin_url: str, tenant: str, agent: str, agent_url: str, kind: str | None
) -> dict[str, Any]:
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
                found = [
                    a
                    for k in ((kind,) if kind else KINDS)
                    if (a := await fleet_agents.find_agent(conn, row.id, k, agent)) is not None
                ]
                if not found:
                    raise typer.BadParameter(f"no agent {agent!r} in {tenant}") from None
                if len(found) > 1:
                    kinds = ", ".join(a.kind for a in found)
                    raise typer.BadParameter(
                        f"{agent!r} names agents of {kinds}: add --kind"
                    ) from None
                agent_id = found[0].id
        services = Services(pool, Settings(database_url=SecretStr(admin_url)))
        return await explain_agent(system_ctx(services, row.id), agent_id, agent_url=agent_url)
    finally:
        await pool.close()


def explain(
    agent: Annotated[
        str,
        typer.Argument(
            help="Agent id, or external id (Telegraf or Vector instance id, Elastic Agent id)."
        ),
    ],
    tenant: Annotated[str, typer.Option(help="Tenant slug.")],
    kind: Annotated[
        str | None,
        typer.Option(help="telegraf, vector or elastic-agent, when an external id names two."),
    ] = None,
    database_url: Annotated[str | None, typer.Option(envvar="STRATAPLANE_DATABASE_URL")] = None,
) -> None:
    """Why an agent gets its configuration: Layers, the source of every value, the render."""
    from strataplane import db
    from strataplane.agents.settings import FleetSettings

    if kind is not None and kind not in KINDS:
        raise typer.BadParameter("telegraf, vector or elastic-agent", param_hint="--kind")
    url = db.resolve_admin_url(database_url)
    out = asyncio.run(_explain(url, tenant, agent, FleetSettings().agent_url, kind))
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
    _simulate(url, credentials, agents, "telegraf", watch_interval, duration, version,
              connections, report_every)  # fmt: skip


@simulate_app.command("vector")
def simulate_vector(
    url: Annotated[str, typer.Option(help="Base URL of the server.")],
    credentials: Annotated[Path, typer.Option(help="JSON \\[\\[instance_id, spv_token], ...].")],
    agents: Annotated[int, typer.Option(help="Instances to run (first N credentials).")] = 0,
    poll_interval: Annotated[float, typer.Option(help="The provider's poll_interval_secs.")] = 30.0,
    duration: Annotated[float, typer.Option(help="Seconds to run.")] = 60.0,
    connections: Annotated[int, typer.Option(help="Keep-alive connections shared.")] = 200,
    report_every: Annotated[float, typer.Option(help="Seconds per JSON report line.")] = 5.0,
    version: Annotated[str, typer.Option(help="Vector version to report.")] = "0.57.0",
) -> None:
    """Run N simulated Vector instances (http provider); print a JSON line per window."""
    _simulate(url, credentials, agents, "vector", poll_interval, duration, version,
              connections, report_every)  # fmt: skip


@simulate_app.command("elastic-agent")
def simulate_elastic_agent(
    url: Annotated[str, typer.Option(help="Base URL of the server.")],
    credentials: Annotated[Path, typer.Option(help="JSON \\[\\[agent_id, spe_key], ...].")],
    agents: Annotated[int, typer.Option(help="Agents to run (first N credentials).")] = 0,
    duration: Annotated[float, typer.Option(help="Seconds to run.")] = 60.0,
    connections: Annotated[int, typer.Option(help="Keep-alive connections shared.")] = 200,
    report_every: Annotated[float, typer.Option(help="Seconds per JSON report line.")] = 5.0,
    version: Annotated[str, typer.Option(help="Elastic Agent version to report.")] = "8.15.0",
    spread: Annotated[float, typer.Option(help="Seconds over which the agents start.")] = 10.0,
    backoff_init: Annotated[
        float, typer.Option(help="fleet.checkin.request_backoff_init: first retry wait, s.")
    ] = 60.0,
    backoff_max: Annotated[
        float, typer.Option(help="fleet.checkin.request_backoff_max: longest retry wait, s.")
    ] = 600.0,
) -> None:
    """Run N simulated Elastic Agents from their access keys; a JSON line per window."""
    _simulate(url, credentials, agents, "elastic-agent", spread, duration, version,
              connections, report_every, (backoff_init, backoff_max))  # fmt: skip


def _simulate(
    url: str,
    credentials: Path,
    agents: int,
    kind: str,
    interval: float,
    duration: float,
    version: str,
    connections: int,
    report_every: float,
    backoff: tuple[float, float] = (60.0, 600.0),
) -> None:
    """The simulated fleet of one kind from a credentials file (the first ``agents``, or all);
    ``interval`` is the kind's watch or poll interval, or Elastic Agents' start spread."""
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
            watch_interval=interval,
            duration=duration,
            version=version,
            connections=connections,
            report_every=report_every,
            kind=kind,
            backoff=backoff,
        ),
        # the simulator shares the machine with the server it measures: uvloop's transports
        # cost it about half the CPU per request of asyncio's
        loop_factory=uvloop.new_event_loop,
    )


@bench_app.command("fleet")
def bench_fleet(
    agents: Annotated[int, typer.Option(help="Simulated agents.")] = 10_000,
    interval: Annotated[
        float, typer.Option(help="Telegraf's HEAD watch interval / Vector's poll interval, s.")
    ] = 10.0,
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
    kind: Annotated[str, typer.Option(help="telegraf, vector or elastic-agent.")] = ("telegraf"),
) -> None:
    """Serve, seed a fleet, poll it from a simulator process, merge, and time the apply."""
    from strataplane.simulate.bench_run import run

    if kind not in KINDS:
        raise typer.BadParameter("telegraf, vector or elastic-agent", param_hint="--kind")

    for line in run(
        agents, interval, workers, connections, database_url, heartbeat_interval, kind=kind
    ):
        sys.stdout.write(json.dumps(line) + "\n")


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
    app.add_typer(simulate_app, name="simulate")
    app.add_typer(bench_app, name="bench")
