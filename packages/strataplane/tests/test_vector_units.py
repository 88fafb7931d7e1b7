"""Vector's pure parts: the renderer (equal trees give equal bytes, the heartbeat pipeline, the
render errors), the reading of its heartbeat (what Vector's log events say about a reload) and
the simulator's model of its reloads."""

from __future__ import annotations

import json
import tomllib
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strataplane.agents.heartbeat import BadHeartbeat
from strataplane.agents.vector_heartbeat import parse_vector_heartbeat
from strataplane.agents.vector_secrets import fill, toml_string
from strataplane.render.artifacts import HASH_PLACEHOLDER
from strataplane.render.vector import global_options, render_vector
from strataplane.simulate.vector import GLOBAL_REJECTED, SimulatedVector, build_error, load

URL = "https://sp.example.com"
BASE = {
    "sources": {"app": {"type": "file", "include": ["/var/log/app.log"]}},
    "sinks": {"out": {"type": "console", "inputs": ["app"], "encoding": {"codec": "json"}}},
}


def render(config: dict[str, object]) -> dict[str, object]:
    out = render_vector(config, agent_url=URL, heartbeat_interval="10s")
    assert out.content is not None, out.diagnostics
    return tomllib.loads(out.content.decode())


def test_components_keep_their_ids_and_the_heartbeat_pipeline_is_added() -> None:
    doc = render({**BASE, "timezone": "UTC", "data_dir": "env://DATA"})
    assert doc["timezone"] == "UTC"
    assert doc["data_dir"] == "${DATA}"
    sources, sinks = doc["sources"], doc["sinks"]
    assert isinstance(sources, dict)
    assert isinstance(sinks, dict)
    assert sources["app"] == BASE["sources"]["app"]
    assert sources["strataplane_metrics"]["scrape_interval_secs"] == 10.0
    beat = sinks["strataplane_heartbeat"]
    assert beat["uri"] == URL + "/agents/vector/heartbeat"
    assert beat["auth"] == {"strategy": "bearer", "token": "${STRATAPLANE_VECTOR_TOKEN}"}
    headers = beat["request"]["headers"]
    assert headers["X-Strataplane-Config-Hash"] == HASH_PLACEHOLDER
    assert headers["X-Strataplane-Instance-Id"] == "${STRATAPLANE_INSTANCE_ID}"
    # the rendered configuration builds in the simulated Vector
    loaded = load(render_vector(BASE, agent_url=URL, heartbeat_interval="1s").content or b"")
    assert loaded is not None
    assert build_error(loaded) is None


@pytest.mark.parametrize(
    ("config", "code"),
    [
        ({**BASE, "sinks": {"out": {"type": "console", "inputs": ["nothing"]}}}, "SP-5008"),
        ({"sinks": {"out": {"type": "console", "inputs": ["*"]}}}, "SP-5001"),
        ({**BASE, "sources": {"app": {"type": "file", "x": "SECRET[strataplane.T]"}}}, "SP-5001"),
    ],
)
def test_what_vector_could_not_run_is_a_render_error(config: dict[str, object], code: str) -> None:
    out = render_vector(config, agent_url=URL, heartbeat_interval="1m")
    assert out.content is None
    assert [d.code for d in out.diagnostics] == [code]


_ids = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: not s.startswith("strataplane")
)


@given(st.dictionaries(_ids, st.sampled_from(["file", "stdin", "demo_logs"]), min_size=1))
def test_equal_trees_render_equal_bytes(sources: dict[str, str]) -> None:
    config = {"sources": {k: {"type": v} for k, v in sources.items()}}
    reordered = {"sources": dict(reversed(list(config["sources"].items())))}
    first = render_vector(config, agent_url=URL, heartbeat_interval="1m").content
    again = render_vector(reordered, agent_url=URL, heartbeat_interval="1m").content
    assert first is not None
    assert first == again
    assert global_options({"timezone": "UTC", **config}) == {"timezone": "UTC"}


def _beat(*events: dict[str, object], instance: str = "edge-1") -> bytes:
    return b"\n".join(json.dumps(e).encode() for e in events) + b"\n"


def _error(message: str, **fields: object) -> dict[str, object]:
    return {"message": message, "metadata": {"level": "ERROR"}, "host": "edge-1", **fields}


BUILD_INFO = {"name": "build_info", "tags": {"version": "0.57.0", "host": "edge-1.example.com"}}


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ([BUILD_INFO], None),
        ([_error(GLOBAL_REJECTED, changed_fields="timezone")], "restart_required"),
        (
            [_error("Reload was not successful.", reason="global_options_changed")],
            "restart_required",
        ),
        ([_error("Reload was not successful.", reason="topology_build_failed")], "reload_failed"),
        ([_error("Configuration error.", error="bad")], "reload_failed"),
    ],
)
def test_what_vector_logs_about_a_reload(
    events: list[dict[str, object]], reason: str | None
) -> None:
    digest = "ab" * 32
    hb = parse_vector_heartbeat(uuid4(), "edge-1", _beat(*events), digest, "edge-1")
    assert hb.reload_error == reason
    assert hb.reported_hash == bytes.fromhex(digest)
    if reason is None:
        assert hb.version == "0.57.0"
        assert hb.facts["hostname"] == "edge-1.example.com"
        assert hb.report.errors == 0
    else:
        assert hb.report.errors == 1
        assert len(hb.logs) == 1


@pytest.mark.parametrize(
    ("body", "instance", "field"),
    [
        (_beat(BUILD_INFO), "someone-else", "X-Strataplane-Instance-Id"),
        (_beat(BUILD_INFO), None, "X-Strataplane-Instance-Id"),
        (b"[1]\n", "edge-1", "body"),
        (b"{nope\n", "edge-1", "body"),
        (b"{}\n" * 1001, "edge-1", "body"),
    ],
)
def test_a_heartbeat_of_another_shape_is_refused_naming_the_field(
    body: bytes, instance: str | None, field: str
) -> None:
    with pytest.raises(BadHeartbeat) as refused:
        parse_vector_heartbeat(uuid4(), "edge-1", body, None, instance)
    assert refused.value.field == field


def test_the_simulated_loader_and_builder() -> None:
    assert load(b"not = [toml") is None
    assert load(b'[sources.a]\ntype = "no_such_source"\n') is None
    broken = load(
        b'[sources.a]\ntype = "stdin"\n[transforms.p]\ntype = "remap"\ninputs = ["a"]\n'
        b'source = ". = parse_json!(.message"\n'
    )
    assert broken is not None
    assert build_error(broken) is not None
    dangling = load(b'[sinks.o]\ntype = "console"\ninputs = ["x"]\n')
    assert dangling is not None
    assert "doesn't match any components" in (build_error(dangling) or "")


def test_a_secret_is_a_reference_in_the_artifact_and_a_value_when_served() -> None:
    sink = {"type": "http", "inputs": ["app"], "uri": "https://x.example.com", "encoding": {}}
    sink["auth"] = {"strategy": "bearer", "token": "secret://API_TOKEN"}
    out = render_vector({**BASE, "sinks": {"api": sink}}, agent_url=URL, heartbeat_interval="10s")
    assert out.content is not None, out.diagnostics
    assert out.secret_names == ["API_TOKEN"]
    stored = tomllib.loads(out.content.decode())
    assert stored["sinks"]["api"]["auth"]["token"] == "SECRET[strataplane.API_TOKEN]"
    served = fill(out.content, {"API_TOKEN": 'a"b\\c$HOME${X}\n'})
    sim = SimulatedVector.__new__(SimulatedVector)
    sim.env = {"HOME": "/root", "X": "x"}
    loaded = sim._substitute(tomllib.loads(served.decode()))
    assert loaded["sinks"]["api"]["auth"]["token"] == 'a"b\\c$HOME${X}\n'


@given(st.text())
def test_a_served_value_reaches_vector_as_it_is(value: str) -> None:
    """TOML escapes, and every $ doubled: Vector's variable expansion gives the value back."""
    sim = SimulatedVector.__new__(SimulatedVector)
    sim.env = {"A": "expanded"}
    parsed = tomllib.loads("v = " + toml_string(value))
    assert sim._substitute(parsed["v"]) == value
