"""Composition of an agent's configuration: which Layers apply, in which order, how they merge,
and which object produced each value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strataplane.domain.spec.canonical import parse
from strataplane.domain.spec.compose import Provenance, compose
from strataplane.domain.spec.kinds_agent import parse_dotted_key
from strataplane.domain.spec.precedence import (
    LayerRef,
    applicable_journeys,
    applicable_layers,
    layers_of,
)

LINUX = {"os": "linux", "env": "prod", "zone": "a"}


def _objects(files: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {path: parse(text.encode()) for path, text in files.items()}


FILES = {
    "layers/base.toml": """
owner = "platform"
agentKind = "telegraf"
[[bundles]]
name = "system"
[config.agent]
interval = "10s"
flush_interval = "10s"
[config.inputs.swap.default]
[config.inputs.http.portal]
urls = ["https://a", "https://b"]
""",
    "layers/prod.toml": """
owner = "platform"
agentKind = "telegraf"
agentVersions = ">=1.37"
precedence = 100
selector = { matchLabels = { env = "prod" } }
remove = ["inputs.swap.default", "inputs.nothing.here"]
routes = ["influx"]
[[bundles]]
name = "system"
params = { interval = "30s" }
[config.agent]
interval = "20s"
[config.inputs.http.portal]
urls = ["https://c"]
""",
    "layers/web.toml": """
owner = "web"
agentKind = "telegraf"
precedence = 100
selector = { matchExpressions = [{ key = "zone", operator = "In", values = ["a"] }] }
[config.agent]
flush_interval = "5s"
""",
    "layers/vector.toml": 'owner = "platform"\nagentKind = "vector"\n'
    '[config.sources.x]\ntype = "file"\n',
    "layers/dev.toml": 'owner = "platform"\nagentKind = "telegraf"\nprecedence = 1000\n'
    'selector = { matchLabels = { env = "dev" } }\n[config.agent]\ninterval = "1s"\n',
    "bundles/system.toml": """
owner = "platform"
agentKind = "telegraf"
[params.interval]
type = "duration"
default = "10s"
[config.inputs.cpu.default]
interval = "param://interval"
percpu = false
""",
    "routes/influx.toml": """
owner = "observability"
agentKind = "telegraf"
[config.outputs.influxdb_v2.prod]
token = "secret://INFLUX_TOKEN"
""",
    "journeys/login.toml": 'owner = "web"\nscript = "x"\n'
    'selector = { matchLabels = { env = "prod" } }\n',
    "journeys/all.toml": 'owner = "web"\nscript = "x"\n',
}


def test_layers_apply_by_kind_version_and_selector_in_precedence_order() -> None:
    layers = layers_of(_objects(FILES))

    def names(found: list[LayerRef]) -> list[str]:
        return [layer.path for layer in found]

    assert names(applicable_layers(layers, "telegraf", "1.40.1", LINUX)) == [
        "layers/base.toml",
        "layers/prod.toml",
        "layers/web.toml",
    ]
    # an unknown version matches only Layers without agentVersions
    assert names(applicable_layers(layers, "telegraf", None, LINUX)) == [
        "layers/base.toml",
        "layers/web.toml",
    ]
    assert names(applicable_layers(layers, "telegraf", "1.36.0", {"env": "dev"})) == [
        "layers/base.toml",
        "layers/dev.toml",
    ]
    assert names(applicable_layers(layers, "vector", "0.57.0", {})) == ["layers/vector.toml"]


def test_merge_rules_and_provenance() -> None:
    result = compose(_objects(FILES), "telegraf", "1.40.1", LINUX)
    assert result.layers == ("layers/base.toml", "layers/prod.toml", "layers/web.toml")
    assert result.config == {
        "agent": {"interval": "20s", "flush_interval": "5s"},
        "inputs": {
            "cpu": {"default": {"interval": "30s", "percpu": False}},
            "http": {"portal": {"urls": ["https://c"]}},  # arrays are replaced, not joined
            "swap": {},  # remove deletes the named key only
        },
        "outputs": {"influxdb_v2": {"prod": {"token": "secret://INFLUX_TOKEN"}}},
    }
    p = result.provenance
    assert p[("agent", "interval")] == Provenance("layers/prod.toml", "layers/prod.toml")
    assert p[("agent", "flush_interval")] == Provenance("layers/web.toml", "layers/web.toml")
    assert p[("inputs", "cpu", "default", "interval")] == Provenance(
        "layers/prod.toml", "bundles/system.toml", "interval"
    )
    assert p[("inputs", "cpu", "default", "percpu")] == Provenance(
        "layers/prod.toml", "bundles/system.toml"
    )
    assert p[("outputs", "influxdb_v2", "prod", "token")].source == "routes/influx.toml"
    assert ("inputs", "swap", "default") not in p  # removed, with its provenance
    assert set(p) == set(_leaves(result.config)) - {("inputs", "swap")}
    # prod and web share precedence 100 and both set agent.* keys, but different ones
    assert result.diagnostics == []
    assert result.ok
    assert result.explain()["agent.flush_interval"] == {
        "layer": "layers/web.toml",
        "source": "layers/web.toml",
        "param": None,
    }


def test_defaults_apply_without_layer_params() -> None:
    result = compose(_objects(FILES), "telegraf", None, {"env": "staging"})
    assert result.config["inputs"]["cpu"]["default"]["interval"] == "10s"  # type: ignore[index]
    assert "swap" in result.config["inputs"]  # type: ignore[operator]


def test_own_config_beats_own_bundles_and_routes() -> None:
    files = dict(FILES)
    files["layers/web.toml"] += (
        '[config.inputs.cpu.default]\npercpu = true\n[[bundles]]\nname = "system"\n'
    )
    files["layers/web.toml"] += 'params = { interval = "1m" }\n'
    result = compose(_objects(files), "telegraf", "1.40.1", LINUX)
    cpu = result.config["inputs"]["cpu"]["default"]  # type: ignore[index]
    assert cpu == {"interval": "1m", "percpu": True}  # the later inclusion wins
    assert result.provenance[("inputs", "cpu", "default", "percpu")].source == "layers/web.toml"
    assert result.provenance[("inputs", "cpu", "default", "interval")] == Provenance(
        "layers/web.toml", "bundles/system.toml", "interval"
    )


def test_equal_precedence_disagreement_warns() -> None:
    files = dict(FILES)
    files["layers/web.toml"] += 'interval = "15s"\n'  # under [config.agent]
    result = compose(_objects(files), "telegraf", "1.40.1", LINUX)
    assert result.config["agent"]["interval"] == "15s"  # type: ignore[index]
    assert [(d.code, d.severity, d.path, d.pointer) for d in result.diagnostics] == [
        ("SP-5003", "warning", "layers/web.toml", "config.agent.interval"),
    ]
    assert result.ok


def test_table_against_non_table_fails_the_render() -> None:
    files = dict(FILES)
    files["layers/web.toml"] = (
        'owner = "web"\nagentKind = "telegraf"\nprecedence = 200\n[config]\nagent = "fast"\n'
    )
    result = compose(_objects(files), "telegraf", "1.40.1", LINUX)
    assert [(d.code, d.path, d.pointer) for d in result.diagnostics] == [
        ("SP-5002", "layers/web.toml", "config.agent"),
    ]
    assert not result.ok
    assert result.config["agent"] == {"interval": "20s", "flush_interval": "10s"}


def test_missing_objects_and_parameters_are_reported_per_agent() -> None:
    files = dict(FILES)
    del files["routes/influx.toml"]
    files["bundles/system.toml"] = files["bundles/system.toml"].replace('default = "10s"\n', "")
    result = compose(_objects(files), "telegraf", None, {})
    assert [(d.code, d.pointer) for d in result.diagnostics] == [("SP-4007", "bundles[0]")]
    result = compose(_objects(files), "telegraf", "1.40.1", LINUX)
    assert [(d.code, d.path, d.pointer) for d in result.diagnostics] == [
        ("SP-4007", "layers/base.toml", "bundles[0]"),
        ("SP-4002", "layers/prod.toml", "routes[0]"),
    ]


def test_journeys_by_selector() -> None:
    objects = _objects(FILES)
    assert applicable_journeys(objects, LINUX) == ["journeys/all.toml", "journeys/login.toml"]
    assert applicable_journeys(objects, {}) == ["journeys/all.toml"]


def _leaves(table: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for k, v in table.items():
        if isinstance(v, dict) and v:
            out += _leaves(v, (*prefix, k))
        else:
            out.append((*prefix, k))
    return out


# The merge against a simple model: every leaf comes from the last applying Layer that sets it.
_layer = st.tuples(
    st.integers(-2, 2),
    st.dictionaries(
        st.sampled_from(["a", "b"]),
        st.dictionaries(
            st.sampled_from(["x", "y", "z"]),
            st.integers(0, 3) | st.lists(st.integers(0, 3), max_size=2),
            max_size=3,
        ),
        max_size=2,
    ),
    st.booleans(),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_layer, max_size=5))
def test_merge_matches_the_model(specs: list[tuple[int, dict[str, Any], bool]]) -> None:
    objects: dict[str, dict[str, Any]] = {}
    for i, (precedence, config, applies) in enumerate(specs):
        selector = {} if applies else {"matchLabels": {"env": "dev"}}
        objects[f"layers/l{i}.toml"] = {
            "owner": "t",
            "agentKind": "vector",
            "precedence": precedence,
            "selector": selector,
            "config": config,
        }
    result = compose(objects, "vector", None, {"env": "prod"})
    order = sorted((p, f"layers/l{i}.toml") for i, (p, _, a) in enumerate(specs) if a)
    model: dict[tuple[str, str], tuple[Any, str]] = {}
    for _, path in order:
        for section, options in objects[path]["config"].items():
            for key, value in options.items():
                model[(section, key)] = (value, path)
    assert result.layers == tuple(path for _, path in order)
    for (section, key), (value, path) in model.items():
        assert result.config[section][key] == value  # type: ignore[index]
        assert result.provenance[(section, key)].layer == path
    assert {k for k in result.provenance if len(k) == 2} == set(model)


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("inputs.swap.default", ("inputs", "swap", "default")),
        ('sources."my.app"', ("sources", "my.app")),
        ("a . 'b.c' . \"\\u00e9\\t\"", ("a", "b.c", "é\t")),
        ('""', ("",)),
    ],
)
def test_dotted_keys(text: str, keys: tuple[str, ...]) -> None:
    assert parse_dotted_key(text) == keys


@pytest.mark.parametrize("text", ["", "a.", ".a", "a..b", "a b", "a.b\n", '"a', "'a'b", '"\\x"'])
def test_bad_dotted_keys(text: str) -> None:
    with pytest.raises(ValueError, match=r"dotted key|escape"):
        parse_dotted_key(text)


def test_remove_with_a_quoted_key() -> None:
    objects: dict[str, dict[str, Any]] = {
        "layers/a.toml": {
            "owner": "t",
            "agentKind": "vector",
            "config": {"sources": {"my.app": {"x": 1}, "b": {}}},
        },
        "layers/b.toml": {
            "owner": "t",
            "agentKind": "vector",
            "precedence": 1,
            "remove": ['sources."my.app"'],
        },
    }
    result = compose(objects, "vector", None, {})
    assert result.config == {"sources": {"b": {}}}
    assert list(result.provenance) == [("sources", "b")]
