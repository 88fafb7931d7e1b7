"""Spec files the fleet's end-to-end tests publish: a Telegraf layer and the route it sends to,
a Vector route, and a settings.toml with heartbeats every second."""

from __future__ import annotations

__all__ = ["TELEGRAF_ROUTE", "VECTOR_ROUTE", "fleet_settings", "telegraf_layer"]

TELEGRAF_ROUTE = """agentKind = "telegraf"
owner = "platform"

[config.outputs.influxdb_v2.main]
urls = ["https://influx.example.com"]
"""
VECTOR_ROUTE = """agentKind = "vector"
owner = "platform"

[config.sinks.out]
type = "console"
inputs = ["app"]
encoding = { codec = "json" }
"""


def telegraf_layer(percpu: str = "false") -> str:
    """A Telegraf layer owned by the team ``platform``: the cpu input (``percpu`` as given)
    sent along the route ``influx`` (``TELEGRAF_ROUTE``)."""
    return f"""agentKind = "telegraf"
owner = "platform"
routes = ["influx"]

[config.inputs.cpu.default]
percpu = {percpu}
"""


def fleet_settings(*kinds: str, default_policy: str | None = None) -> str:
    """A settings.toml owned by ``platform``: a heartbeat every second for each agent kind in
    ``kinds``, and the rollout policy ``default_policy`` as the default if given."""
    text = 'owner = "platform"\n'
    for kind in kinds:
        text += f'\n[{kind}.heartbeat]\ninterval = "1s"\n'
    if default_policy is not None:
        text += f'\n[rollout]\ndefaultPolicy = "{default_policy}"\n'
    return text
