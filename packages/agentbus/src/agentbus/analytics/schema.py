"""The ClickHouse DDL (``schema.sql``, the data model's §2.3-2.6) and how it is applied: the same
statements for chDB and for a server, with the replicated engines and the tiered storage policy
filled in only where the deployment has them."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

__all__ = ["Layout", "statements"]

_ZK = {
    "zk_retention": "tenant_retention_source",
    "zk_events": "events",
    "zk_usage": "usage",
    "zk_pricing": "model_pricing",
    "zk_audit": "audit_chain",
    "zk_cost": "mv_cost_daily",
    "zk_edges": "mv_edges_daily",
    "zk_latency": "mv_delivery_latency_hourly",
}
# Engines whose only argument is the version column take a comma after the Keeper path.
_HAS_VERSION = {"zk_retention", "zk_events"}


@dataclass(frozen=True)
class Layout:
    """``cluster``: a ClickHouse cluster name for ON CLUSTER and Replicated engines (the model's
    production layout); ``tiered``: the server has the model's 'tiered' storage policy with a
    'cold' volume (§2.2). Both off for chDB and a single server."""

    cluster: str | None = None
    tiered: bool = False


def _values(layout: Layout) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, table in _ZK.items():
        if layout.cluster is None:
            values[key] = ""
        else:
            path = f"'/clickhouse/tables/{{shard}}/{table}', '{{replica}}'"
            values[key] = path + (", " if key in _HAS_VERSION else "")
    values["on_cluster"] = "" if layout.cluster is None else f"ON CLUSTER {layout.cluster}"
    values["replicated"] = "" if layout.cluster is None else "Replicated"
    if layout.tiered:
        values["cold"] = "toDateTime(event_time) + INTERVAL 30 DAY TO VOLUME 'cold',\n    "
        values["cold_usage"] = "toDateTime(recorded_at) + INTERVAL 30 DAY TO VOLUME 'cold',\n    "
        values["tiered"] = "storage_policy = 'tiered', "
        values["settings_tiered"] = "SETTINGS storage_policy = 'tiered'"
    else:
        values.update(cold="", cold_usage="", tiered="", settings_tiered="")
    return values


def statements(layout: Layout | None = None) -> list[str]:
    """The DDL's statements in order, each idempotent (IF NOT EXISTS)."""
    text = (files("agentbus.analytics") / "schema.sql").read_text(encoding="utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    values = _values(layout or Layout())
    out: list[str] = []
    for chunk in body.split("\n;\n"):
        statement = chunk.strip()
        if statement:
            for key, value in values.items():
                statement = statement.replace("{" + key + "}", value)
            out.append(statement)
    return out
