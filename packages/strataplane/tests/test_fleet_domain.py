"""The fleet's pure parts: labels and zones, versions and health, the Telegraf renderer, the
render cache, artifacts and the folding of heartbeats."""

from __future__ import annotations

import hashlib
import ipaddress
import tomllib
import uuid
from datetime import UTC, datetime

import pytest
from strataplane.agents.auth import client_address, credential_of
from strataplane.agents.heartbeat import fold, parse_heartbeat
from strataplane.domain.fleet_labels import (
    LabelError,
    check_labels,
    effective_labels,
    longest_prefix,
)
from strataplane.domain.fleet_status import Report, health_of, http_date, telegraf_version
from strataplane.render.artifacts import HASH_PLACEHOLDER, deliverable
from strataplane.render.cache import RenderCache, supported_version
from strataplane.render.telegraf import render_telegraf
from strataplane.render.trees import parse_tree
from strataplane.store.fleet_reports import ReportRow

LAYER = (
    b'agentKind = "telegraf"\nowner = "p"\nroutes = ["out"]\n\n'
    b"[config.inputs.cpu.default]\npercpu = false\n"
)
ROUTE = b'agentKind = "telegraf"\nowner = "p"\n\n[config.outputs.file.main]\nfiles = ["stdout"]\n'


def group_layer(g: int) -> bytes:
    return (
        f'agentKind = "telegraf"\nowner = "p"\nprecedence = 10\n\n[config.global_tags]\n'
        f'group = "g{g}"\n\n[selector.matchLabels]\ngroup = "g{g}"\n'
    ).encode()


def test_label_sources_rank_and_built_ins() -> None:
    rows = [
        ("manual", "env", "prod"),
        ("agent", "env", "dev"),
        ("zone", "zone", "dmz"),
        ("enrollment", "zone", "office"),
        ("placement", "runner", "true"),
        ("agent", "os", "linux"),
    ]
    labels = effective_labels(rows, name="web-1", kind="server", owner="web")
    assert labels == {
        "env": "prod",
        "zone": "office",
        "runner": "true",
        "os": "linux",
        "host.name": "web-1",
        "host.kind": "server",
        "owner": "web",
    }
    assert "owner" not in effective_labels([], name="h", kind="pod", owner=None)


@pytest.mark.parametrize(
    ("labels", "source"),
    [
        ({"host.name": "x"}, "manual"),
        ({"owner": "x"}, "enrollment"),
        ({"os": "linux"}, "manual"),
        ({"Bad": "x"}, "manual"),
        ({"k": "a\nb"}, "zone"),
        ({"k": 1}, "manual"),
    ],
)
def test_labels_no_source_may_set(labels: dict[str, object], source: str) -> None:
    with pytest.raises(LabelError):
        check_labels(labels, source)


def test_longest_prefix_wins_and_families_do_not_mix() -> None:
    zones = [
        ("10.0.0.0/8", {"zone": "a"}),
        ("10.1.0.0/16", {"zone": "b"}),
        ("::/0", {"zone": "v6"}),
    ]
    assert longest_prefix("10.1.2.3", zones) == {"zone": "b"}
    assert longest_prefix("10.2.0.1", zones) == {"zone": "a"}
    assert longest_prefix("192.168.1.1", zones) is None
    assert longest_prefix("2001:db8::1", zones) == {"zone": "v6"}


def test_versions_from_user_agent_and_heartbeat() -> None:
    assert telegraf_version("Telegraf/1.39.1 Go/1.24.4") == ("1.39.1", "1.39.1")
    assert telegraf_version("Telegraf 1.37.0") == ("1.37.0", "1.37.0")
    assert telegraf_version("Telegraf/v1.40.0-rc1 Go/1.25") == ("1.40.0-rc1", "1.40.0-rc1")
    assert telegraf_version("curl/8") == (None, "curl/8")
    assert not supported_version("telegraf", "1.36.2")
    assert supported_version("telegraf", "1.37.0")
    assert supported_version("telegraf", None)


def test_health_and_http_date() -> None:
    assert health_of(Report("FAIL"))[0] == "failed"
    assert health_of(Report("WARN"))[0] == "degraded"
    assert health_of(Report(None, errors=2))[0] == "degraded"
    assert health_of(Report("UNDEFINED")) == ("healthy", None)
    assert health_of(Report("OK")) == ("healthy", None)
    # OK is the default status of a heartbeat without conditions: errors still degrade
    assert health_of(Report("OK", errors=3)) == (
        "degraded",
        "3 errors, 0 warnings since the last report",
    )
    when = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC)
    assert http_date(when) == "Fri, 02 Jan 2026 03:04:05 GMT"


def test_credentials_bearer_or_token_only() -> None:
    token = "spt_" + "a" * 52
    assert credential_of(f"Bearer {token}") == token == credential_of(f"Token {token}")
    assert credential_of(f"Basic {token}") is None
    assert credential_of("Bearer spk_" + "a" * 52) is None
    assert credential_of(f"Bearer {token}x") is None


def test_renderer_aliases_references_and_heartbeat() -> None:
    config = {
        "inputs": {"http": {"portal": {"password": "secret://PW", "user": "env://USER"}}},
        "outputs": {"file": {"main": {"files": ["stdout"]}}},
    }
    out = render_telegraf(config, agent_url="http://sp", heartbeat_interval="10s", version="1.38.0")
    assert out.content is not None
    assert out.secret_names == ["PW"]
    doc = tomllib.loads(out.content.decode())
    http = doc["inputs"]["http"][0]
    assert http["alias"] == "portal"
    assert http["password"] == "@{strataplane:PW}"
    assert http["user"] == "${USER}"
    beat = doc["outputs"]["heartbeat"][0]
    assert beat["url"] == "http://sp/agents/telegraf/heartbeat"
    assert beat["token"] == "${INFLUX_TOKEN}"  # before 1.39 the token comes from INFLUX_TOKEN
    assert beat["headers"]["X-Strataplane-Config-Hash"] == HASH_PLACEHOLDER
    assert doc["secretstores"]["http"][0]["id"] == "strataplane"
    empty = render_telegraf({}, agent_url="http://sp", heartbeat_interval="1m", version=None)
    assert empty.content is None
    assert empty.diagnostics[0].code == "SP-5001"


def test_settings_telegraf_tls_reach_the_two_plugins_that_talk_to_the_server() -> None:
    config = {
        "inputs": {"cpu": {"default": {}}},
        "outputs": {"file": {"main": {"token": "secret://T"}}},
    }
    tls = {"ca": "/etc/telegraf/ca.pem", "cert": "env://AGENT_CERT", "key": "/etc/agent.key"}
    out = render_telegraf(
        config, agent_url="https://sp", heartbeat_interval="10s", version="1.39.1", tls=tls
    )
    assert out.content is not None
    doc = tomllib.loads(out.content.decode())
    wanted = {"tls_ca": "/etc/telegraf/ca.pem", "tls_cert": "${AGENT_CERT}"}
    wanted["tls_key"] = "/etc/agent.key"
    for plugin in (doc["outputs"]["heartbeat"][0], doc["secretstores"]["http"][0]):
        assert {k: v for k, v in plugin.items() if k.startswith("tls_")} == wanted
    assert "tls_cert" not in doc["outputs"]["file"][0]
    plain = render_telegraf(config, agent_url="https://sp", heartbeat_interval="10s", version=None)
    assert plain.content is not None
    assert b"tls_" not in plain.content


def test_render_cache_renders_once_per_input_set() -> None:
    files = {"layers/base.toml": LAYER, "routes/out.toml": ROUTE}
    files |= {f"layers/g{g}.toml": group_layer(g) for g in range(50)}
    tree = parse_tree(files)
    cache, tenant = RenderCache(), uuid.uuid4()
    hashes = set()
    for i in range(2000):
        labels = {"group": f"g{i % 50}", "host.name": f"h{i}"}
        result = cache.render(tenant, tree, "telegraf", "1.39.1", labels, "http://sp")
        assert result.artifact is not None
        hashes.add(result.artifact.hash)
    assert cache.renders == 50
    assert len(hashes) == 50
    art = cache.render(tenant, tree, "telegraf", "1.39.1", {"group": "g1"}, "http://sp").artifact
    assert art is not None
    assert hashlib.sha256(art.content).digest() == art.hash
    served = deliverable(art.content, art.hash)
    assert len(served) == art.size
    assert art.hash.hex().encode() in served
    assert HASH_PLACEHOLDER.encode() not in served


def test_broken_composition_renders_nothing() -> None:
    clash = b'agentKind = "telegraf"\nowner = "p"\nprecedence = 5\n\n[config.inputs]\ncpu = 1\n'
    tree = parse_tree({"layers/base.toml": LAYER, "routes/out.toml": ROUTE, "layers/x.toml": clash})
    result = RenderCache().render(uuid.uuid4(), tree, "telegraf", "1.39.1", {}, "http://sp")
    assert result.artifact is None
    assert {d.code for d in result.diagnostics} == {"SP-5002"}


def test_explain_names_the_source_of_every_value() -> None:
    tree = parse_tree(
        {"layers/base.toml": LAYER, "routes/out.toml": ROUTE, "layers/g1.toml": group_layer(1)}
    )
    comp = RenderCache.compose(tree, "telegraf", "1.39.1", {"group": "g1"})
    values = comp.explain()
    assert values["inputs.cpu.default.percpu"]["layer"] == "layers/base.toml"
    assert values["outputs.file.main.files"]["source"] == "routes/out.toml"
    assert values["global_tags.group"]["layer"] == "layers/g1.toml"


def _row(**kw: object) -> ReportRow:
    base: dict[str, object] = {
        "id": uuid.uuid4(),
        "health": "pending",
        "sync": "updating",
        "sync_reason": None,
        "version": None,
        "desired_artifact": b"d" * 32,
        "desired_revision_id": 7,
        "served_artifact": b"d" * 32,
        "applied_artifact": None,
        "applied_revision_id": None,
    }
    return ReportRow(**(base | kw))  # type: ignore[arg-type]


def test_heartbeat_proves_applied_and_ignores_unknown_hashes() -> None:
    row = _row()
    body = {
        "id": "x",
        "version": "Telegraf 1.39.1",
        "schema": 1,
        "status": "OK",
        "logs": [
            {
                "time": "2026-01-01T00:00:00Z",
                "level": "error",
                "source": "inputs.http::portal",
                "message": "boom",
            }
        ],
    }
    hb = parse_heartbeat(row.id, "x", body, (b"d" * 32).hex())
    update, events = fold(row, hb, set())
    assert update.applied_artifact == b"d" * 32
    assert update.applied_revision_id == 7
    assert update.sync == "in_sync"
    assert update.health == "healthy"
    assert {e[1] for e in events} == {"health", "sync", "applied", "version"}
    assert hb.logs[0][4] == "portal"
    assert hb.logs[0][2] == "ERROR"
    stranger = parse_heartbeat(row.id, "x", body, (b"z" * 32).hex())
    update, _ = fold(row, stranger, set())
    assert update.applied_artifact is None
    assert update.sync == "updating"
    other = parse_heartbeat(row.id, "x", body, (b"o" * 32).hex())
    update, _ = fold(row, other, {b"o" * 32})  # an artifact of the tenant, not the desired one
    assert update.applied_artifact == b"o" * 32
    assert update.applied_revision_id is None
    with pytest.raises(ValueError, match="schema"):
        parse_heartbeat(row.id, "x", {"id": "x", "version": "v", "schema": 2}, None)


def test_forwarded_for_is_trusted_only_from_configured_proxies() -> None:
    proxies = [ipaddress.ip_network("10.0.0.0/24")]
    assert client_address("10.0.0.5", "203.0.113.9, 10.0.0.7", proxies) == "203.0.113.9"
    assert client_address("198.51.100.1", "203.0.113.9", proxies) == "198.51.100.1"
    assert client_address("10.0.0.5", "", proxies) == "10.0.0.5"
    assert client_address("10.0.0.5", "not-an-ip", proxies) == "10.0.0.5"
    assert client_address(None, "203.0.113.9", proxies) is None
