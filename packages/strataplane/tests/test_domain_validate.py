"""Validation of edits and trees: the documented examples are valid, and every diagnostic code
of the file, schema, selector/version and reference groups has an example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from strataplane.domain.spec.diagnostics import CODES, Diagnostic, sort_diagnostics, truncate
from strataplane.domain.spec.index import index_columns
from strataplane.domain.spec.validate import TreeContext, check_edit, validate_tree

TEAMS = frozenset({"platform", "web", "sre", "observability", "security"})
DOC = Path(__file__).resolve().parents[3] / "docs" / "strataplane" / "spec-format.md"

BASE: dict[str, str] = {
    "layers/base.toml": """
owner = "platform"
agentKind = "telegraf"
agentVersions = ">=1.37, <2"
precedence = 100
routes = ["influx"]
remove = ["inputs.swap.default", 'inputs."my.plugin".x']
selector = { matchLabels = { os = "linux" } }

[[bundles]]
name = "system"
params = { interval = "30s" }

[config.agent]
flush_interval = "10s"

[config.inputs.http.portal]
urls = ["https://portal.example.com/health"]
password = "secret://PORTAL"
""",
    "bundles/system.toml": """
owner = "platform"
agentKind = "telegraf"

[params.interval]
type = "duration"
default = "10s"

[params.mounts]
type = "string-array"
default = []

[config.inputs.cpu.default]
interval = "param://interval"

[config.inputs.disk.default]
mount_points = "param://mounts"
""",
    "routes/influx.toml": """
owner = "observability"
agentKind = "telegraf"

[config.outputs.influxdb_v2.prod]
token = "secret://INFLUX_TOKEN"
urls = ["https://influx.example.com:8086"]
""",
    "secrets/PORTAL.toml": """
owner = "web"
minAssurance = "high"
grant = { agentKinds = ["telegraf", "strataplane-agent"], matchLabels = { env = "prod" } }
""",
    "secrets/INFLUX_TOKEN.toml": 'owner = "observability"\ngrant = {}\n',
    "journeys/login.toml": """
owner = "web"
script = "step('open', () => page.goto(vars.BASE_URL))"
timeout = "90s"
[vars]
BASE_URL = "https://portal.example.com"
PASSWORD = "secret://PORTAL"
""",
    "policies/approval/default.toml": """
owner = "platform"
[[rules]]
name = "owners"
teams = ["@owners"]
[[rules]]
name = "destinations"
teams = ["sre", "observability"]
mode = "any"
when = { kinds = ["Route"], owners = ["web"] }
""",
    "policies/rollout/standard.toml": """
owner = "sre"
agentKinds = ["telegraf"]
[[stages]]
name = "canary"
bakeTime = "30m"
selector = { matchLabels = { canary = "true" } }
[[stages]]
name = "everything"
[guardrails]
maxHealthRegressionPercent = 5.0
journeys = ["login"]
""",
    "settings.toml": """
owner = "platform"
[rollout]
defaultPolicy = "standard"
[render]
level = 1
[assistant]
defaultModel = "internal/large"
""",
    "placements/runners.toml": """
owner = "web"
key = "journey-runner"
count = 2
groupBy = "zone"
[candidates]
agentKinds = ["strataplane-agent"]
matchLabels = { "host.kind" = "server" }
""",
}

CTX = TreeContext(
    teams=TEAMS,
    catalog_versions={"telegraf": ["1.40.1"]},
    offered_models=frozenset({"internal/large"}),
)


def _tree(changes: dict[str, str | bytes | None]) -> dict[str, bytes]:
    tree: dict[str, bytes] = {p: t.encode() for p, t in BASE.items()}
    for path, content in changes.items():
        if content is None:
            tree.pop(path, None)
        else:
            tree[path] = content if isinstance(content, bytes) else content.encode()
    return tree


def _found(changes: dict[str, str | bytes | None], ctx: TreeContext = CTX) -> list[Diagnostic]:
    return list(validate_tree(_tree(changes), ctx).diagnostics)


def sub(path: str, old: str, new: str) -> dict[str, str | bytes | None]:
    assert old in BASE[path], old
    return {path: BASE[path].replace(old, new, 1)}


def test_the_base_tree_is_valid() -> None:
    result = validate_tree(_tree({}), CTX)
    assert result.diagnostics == ()
    assert result.ok
    assert set(result.facts) == set(BASE)


def test_the_documented_examples_are_valid() -> None:
    examples = dict(
        re.findall(r"```toml\n# ([A-Za-z/._-]+\.toml)\n(.*?)```", DOC.read_text(), re.S)
    )
    assert len(examples) == 9
    examples["secrets/INFLUX_TOKEN.toml"] = 'owner = "observability"\ngrant = {}\n'
    result = validate_tree({p: t.encode() for p, t in examples.items()}, TreeContext(teams=TEAMS))
    assert result.diagnostics == ()


LAYER, BUNDLE, ROUTE, JOURNEY = (
    "layers/base.toml",
    "bundles/system.toml",
    "routes/influx.toml",
    "journeys/login.toml",
)
APPROVAL, ROLLOUT, SETTINGS_, PLACEMENT = (
    "policies/approval/default.toml",
    "policies/rollout/standard.toml",
    "settings.toml",
    "placements/runners.toml",
)
SECRET = "secrets/PORTAL.toml"

CASES: list[tuple[str, dict[str, str | bytes | None], str, str | None]] = [
    # (code, changes, path, pointer)
    ("SP-1001", {"layers/x/y.toml": 'owner = "web"'}, "layers/x/y.toml", None),
    ("SP-1002", {"layers/X.toml": 'owner = "web"'}, "layers/X.toml", None),
    ("SP-1003", {LAYER: b"owner = \xff"}, LAYER, None),
    (
        "SP-1004",
        {"secrets/D.toml": 'owner = "web"\ngrant = {}\nwhen = 2025-01-01\n'},
        "secrets/D.toml",
        "when",
    ),
    ("SP-1005", {ROUTE: "a = " + "[" * 40 + "]" * 40}, ROUTE, "a" + "[0]" * 32),
    ("SP-2001", sub(LAYER, 'owner = "platform"', ""), LAYER, None),
    ("SP-2001", sub(ROUTE, 'agentKind = "telegraf"', ""), ROUTE, None),
    (
        "SP-2001",
        {
            "routes/v.toml": 'owner = "web"\nagentKind = "vector"\n'
            '[config.sinks.out]\ntype = "console"\n'
        },
        "routes/v.toml",
        "config.sinks.out",
    ),
    ("SP-2002", sub(LAYER, "precedence = 100", 'precedence = 100\nkind = "Layer"'), LAYER, "kind"),
    ("SP-2002", sub(SECRET, 'minAssurance = "high"', 'value = "hunter2"'), SECRET, "value"),
    (
        "SP-2002",
        sub(ROLLOUT, 'bakeTime = "30m"', 'bakeTime = "30m"\nwait = "1m"'),
        ROLLOUT,
        "stages[0].wait",
    ),
    ("SP-2003", sub(LAYER, "precedence = 100", 'precedence = "high"'), LAYER, "precedence"),
    (
        "SP-2003",
        sub(JOURNEY, 'BASE_URL = "https', 'PORT = 80\nBASE_URL = "https'),
        JOURNEY,
        "vars.PORT",
    ),
    ("SP-2003", sub(BUNDLE, 'default = "10s"', "default = 10"), BUNDLE, "params.interval.default"),
    ("SP-2004", sub(LAYER, "precedence = 100", "precedence = 2147483648"), LAYER, "precedence"),
    (
        "SP-2004",
        sub(ROLLOUT, 'bakeTime = "30m"', 'bakeTime = "1.5h"'),
        ROLLOUT,
        "stages[0].bakeTime",
    ),
    ("SP-2004", sub(JOURNEY, 'timeout = "90s"', 'timeout = "6m"'), JOURNEY, "timeout"),
    (
        "SP-2004",
        sub(JOURNEY, 'timeout = "90s"', 'timeout = "11m"\ninterval = "1h"'),
        JOURNEY,
        "timeout",
    ),
    (
        "SP-2004",
        sub(JOURNEY, 'timeout = "90s"', 'interval = "30s"\ntimeout = "10s"'),
        JOURNEY,
        "interval",
    ),
    ("SP-2004", sub(SETTINGS_, "level = 1", "level = 2"), SETTINGS_, "render.level"),
    ("SP-2004", {ROLLOUT: 'owner = "sre"\nstages = []\n'}, ROLLOUT, "stages"),
    ("SP-2004", sub(LAYER, 'agentKind = "telegraf"', 'agentKind = "fluentd"'), LAYER, "agentKind"),
    (
        "SP-2004",
        sub(LAYER, 'remove = ["inputs', 'remove = ["inputs..x", "inputs'),
        LAYER,
        "remove[0]",
    ),
    (
        "SP-2004",
        sub(APPROVAL, 'teams = ["@owners"]', 'teams = ["@everyone"]'),
        APPROVAL,
        "rules[0].teams[0]",
    ),
    (
        "SP-2004",
        sub(APPROVAL, 'kinds = ["Route"]', 'kinds = ["Routes"]'),
        APPROVAL,
        "rules[1].when.kinds[0]",
    ),
    (
        "SP-2004",
        sub(SETTINGS_, 'defaultModel = "internal/large"', 'defaultModel = "large"'),
        SETTINGS_,
        "assistant.defaultModel",
    ),
    (
        "SP-2005",
        sub(LAYER, "[config.agent]", '[[bundles]]\nname = "system"\n\n[config.agent]'),
        LAYER,
        "bundles[1]",
    ),
    (
        "SP-2005",
        sub(APPROVAL, 'name = "destinations"', 'name = "owners"'),
        APPROVAL,
        "rules[1].name",
    ),
    ("SP-2005", sub(ROLLOUT, 'name = "everything"', 'name = "canary"'), ROLLOUT, "stages[1].name"),
    ("SP-2006", sub(ROUTE, 'owner = "observability"', 'owner = "nobody"'), ROUTE, "owner"),
    (
        "SP-2007",
        sub(LAYER, "[config.agent]", "[config.outputs.file.x]\nfiles = []\n[config.agent]"),
        LAYER,
        "config.outputs",
    ),
    (
        "SP-2007",
        sub(ROUTE, "[config.outputs", "[config.inputs.cpu.x]\n[config.outputs"),
        ROUTE,
        "config.inputs",
    ),
    (
        "SP-2007",
        sub(LAYER, "[config.inputs.http.portal]", '[config.inputs.http.portal]\nalias = "p"'),
        LAYER,
        "config.inputs.http.portal.alias",
    ),
    (
        "SP-2007",
        sub(
            BUNDLE,
            "[config.inputs.cpu.default]",
            "[config.secretstores.http.x]\n[config.inputs.cpu.default]",
        ),
        BUNDLE,
        "config.secretstores",
    ),
    (
        "SP-2007",
        sub(
            ROUTE,
            "[config.outputs.influxdb_v2.prod]",
            "[config.outputs.heartbeat.x]\n[config.outputs.influxdb_v2.prod]",
        ),
        ROUTE,
        "config.outputs.heartbeat",
    ),
    (
        "SP-2007",
        {
            "bundles/v.toml": 'owner = "web"\nagentKind = "vector"\n'
            '[config.sources.strataplane_hb]\ntype = "x"\n'
        },
        "bundles/v.toml",
        "config.sources.strataplane_hb",
    ),
    (
        "SP-2007",
        {
            "bundles/v.toml": 'owner = "web"\nagentKind = "vector"\n'
            '[config.provider]\ntype = "http"\n'
        },
        "bundles/v.toml",
        "config.provider",
    ),
    (
        "SP-2011",
        {
            "bundles/v.toml": 'owner = "web"\nagentKind = "vector"\n'
            '[config.sources.app]\ntype = "filez"\n'
        },
        "bundles/v.toml",
        "config.sources.app.type",
    ),
    (
        "SP-2008",
        sub(
            LAYER,
            "[config.inputs.http.portal]",
            '[config.inputs.http."Portal Page"]\nx = 1\n[config.inputs.http.portal]',
        ),
        LAYER,
        'config.inputs.http."Portal Page"',
    ),
    (
        "SP-2008",
        sub(
            BUNDLE,
            "[config.inputs.cpu.default]",
            "[config.inputs.cpu]\npercpu = true\n[config.inputs.cpu.default]",
        ),
        BUNDLE,
        "config.inputs.cpu.percpu",
    ),
    (
        "SP-2009",
        {"routes/r.toml": 'owner = "web"\nagentKind = "strataplane-agent"\n[config]\n'},
        "routes/r.toml",
        "agentKind",
    ),
    ("SP-3001", sub(LAYER, 'os = "linux"', '"OS" = "linux"'), LAYER, "selector.matchLabels.OS"),
    (
        "SP-3002",
        sub(
            LAYER,
            'selector = { matchLabels = { os = "linux" } }',
            'selector = { matchExpressions = [{ key = "os", operator = "Is", values = ["x"] }] }',
        ),
        LAYER,
        "selector.matchExpressions[0].operator",
    ),
    (
        "SP-3003",
        sub(
            SECRET,
            'matchLabels = { env = "prod" }',
            'matchExpressions = [{ key = "env", operator = "In", values = [] }]',
        ),
        SECRET,
        "grant.matchExpressions[0].values",
    ),
    ("SP-3004", sub(LAYER, 'os = "linux"', "port = 80"), LAYER, "selector.matchLabels.port"),
    (
        "SP-3004",
        sub(
            PLACEMENT,
            'matchLabels = { "host.kind" = "server" }',
            'matchLabels = { host.kind = "server" }',
        ),
        PLACEMENT,
        "candidates.matchLabels.host",
    ),
    ("SP-3005", sub(LAYER, 'os = "linux"', 'os = "Linux"'), LAYER, "selector.matchLabels.os"),
    (
        "SP-3006",
        sub(LAYER, 'agentVersions = ">=1.37, <2"', 'agentVersions = "1.37.x"'),
        LAYER,
        "agentVersions",
    ),
    (
        "SP-3007",
        sub(LAYER, 'agentVersions = ">=1.37, <2"', 'agentVersions = ">=2, <1"'),
        LAYER,
        "agentVersions",
    ),
    (
        "SP-3008",
        sub(LAYER, 'agentVersions = ">=1.37, <2"', 'agentVersions = "^1.41"'),
        LAYER,
        "agentVersions",
    ),
    (
        "SP-3009",
        sub(
            ROLLOUT,
            'name = "everything"',
            'name = "everything"\nselector = { matchLabels = { zone = "a" } }',
        ),
        ROLLOUT,
        "stages[1].selector",
    ),
    (
        "SP-3010",
        sub(PLACEMENT, 'groupBy = "zone"', 'groupBy = "journey-runner"'),
        PLACEMENT,
        "groupBy",
    ),
    ("SP-4001", {BUNDLE: None}, LAYER, "bundles[0].name"),
    ("SP-4002", {ROUTE: None}, LAYER, "routes[0]"),
    (
        "SP-4003",
        sub(ROUTE, 'agentKind = "telegraf"', 'agentKind = "elastic-agent"'),
        LAYER,
        "routes[0]",
    ),
    (
        "SP-4003",
        sub(BUNDLE, 'agentKind = "telegraf"', 'agentKind = "vector"'),
        LAYER,
        "bundles[0].name",
    ),
    ("SP-4004", {SECRET: None}, JOURNEY, "vars.PASSWORD"),
    ("SP-4004", {SECRET: None}, LAYER, "config.inputs.http.portal.password"),
    (
        "SP-4005",
        sub(LAYER, 'password = "secret://PORTAL"', 'password = "secret://PORTAL/v2"'),
        LAYER,
        "config.inputs.http.portal.password",
    ),
    (
        "SP-4005",
        sub(LAYER, 'password = "secret://PORTAL"', 'password = "param://interval"'),
        LAYER,
        "config.inputs.http.portal.password",
    ),
    (
        "SP-4005",
        sub(JOURNEY, 'BASE_URL = "https://portal.example.com"', 'BASE_URL = "env://URL"'),
        JOURNEY,
        "vars.BASE_URL",
    ),
    (
        "SP-4005",
        {
            "routes/e.toml": 'owner = "web"\nagentKind = "elastic-agent"\n'
            '[config.outputs.es]\nhosts = "env://ES_HOSTS"\n'
        },
        "routes/e.toml",
        "config.outputs.es.hosts",
    ),
    (
        "SP-4006",
        sub(LAYER, 'flush_interval = "10s"', 'flush_interval = "${FLUSH}"'),
        LAYER,
        "config.agent.flush_interval",
    ),
    (
        "SP-4006",
        sub(ROUTE, "urls = [", 'urls = ["$HOST", '),
        ROUTE,
        "config.outputs.influxdb_v2.prod.urls[0]",
    ),
    (
        "SP-4007",
        sub(BUNDLE, 'mount_points = "param://mounts"', 'mount_points = "param://mountz"'),
        BUNDLE,
        "config.inputs.disk.default.mount_points",
    ),
    (
        "SP-4007",
        sub(LAYER, 'params = { interval = "30s" }', 'params = { interval = "30s", extra = 1 }'),
        LAYER,
        "bundles[0].params.extra",
    ),
    (
        "SP-4007",
        sub(LAYER, 'params = { interval = "30s" }', "params = { interval = 30 }"),
        LAYER,
        "bundles[0].params.interval",
    ),
    ("SP-4007", sub(BUNDLE, "default = []\n", ""), LAYER, "bundles[0].params"),
    (
        "SP-4008",
        sub(SETTINGS_, 'defaultPolicy = "standard"', 'defaultPolicy = "fast"'),
        SETTINGS_,
        "rollout.defaultPolicy",
    ),
    ("SP-4008", {JOURNEY: None}, ROLLOUT, "guardrails.journeys[0]"),
    (
        "SP-4009",
        sub(APPROVAL, '"sre", "observability"', '"sre", "obs"'),
        APPROVAL,
        "rules[1].teams[1]",
    ),
    (
        "SP-4009",
        sub(APPROVAL, 'owners = ["web"]', 'owners = ["webb"]'),
        APPROVAL,
        "rules[1].when.owners[0]",
    ),
    ("SP-4010", sub(PLACEMENT, 'key = "journey-runner"', 'key = "owner"'), PLACEMENT, "key"),
    (
        "SP-4010",
        {"placements/other.toml": 'owner = "web"\nkey = "journey-runner"\ncount = 1\n'},
        "placements/other.toml",
        "key",
    ),
    (
        "SP-4011",
        sub(LAYER, 'password = "secret://PORTAL"', 'password = "hunter2"'),
        LAYER,
        "config.inputs.http.portal.password",
    ),
    (
        "SP-4011",
        sub(
            ROUTE,
            'token = "secret://INFLUX_TOKEN"',
            'auth_token = "abc"\ntoken = "secret://INFLUX_TOKEN"',
        ),
        ROUTE,
        "config.outputs.influxdb_v2.prod.auth_token",
    ),
    (
        "SP-4013",
        {"secrets/portal.toml": 'owner = "web"\ngrant = {}\n'},
        "secrets/portal.toml",
        None,
    ),
    (
        "SP-4014",
        sub(SETTINGS_, 'defaultModel = "internal/large"', 'defaultModel = "internal/small"'),
        SETTINGS_,
        "assistant.defaultModel",
    ),
]


@pytest.mark.parametrize(("code", "changes", "path", "pointer"), CASES, ids=[c[0] for c in CASES])
def test_diagnostic_examples(
    code: str, changes: dict[str, str | bytes | None], path: str, pointer: str | None
) -> None:
    found = _found(changes)
    assert (code, path, pointer) in [(d.code, d.path, d.pointer) for d in found], found


def test_every_code_of_the_tree_groups_has_an_example() -> None:
    # SP-2010 needs the catalog: test_catalog_validation covers it
    covered = {c[0] for c in CASES} | {"SP-1006", "SP-4012", "SP-2010", "SP-4015"}
    tree_codes = {c for c in CODES if c[3] in "1234"}
    assert tree_codes - covered == set()


def test_deleted_secret_with_versions_warns_at_its_path() -> None:
    ctx = TreeContext(
        teams=TEAMS, base_paths=frozenset(BASE), secrets_with_versions=frozenset({"INFLUX_TOKEN"})
    )
    found = _found({"secrets/INFLUX_TOKEN.toml": None, ROUTE: None}, ctx)
    assert [(d.code, d.severity, d.path) for d in found] == [
        ("SP-4002", "error", LAYER),
        ("SP-4012", "warning", "secrets/INFLUX_TOKEN.toml"),
    ]


def test_a_reference_to_a_secret_without_a_value_is_an_error_where_it_changed() -> None:
    no_values = TreeContext(teams=TEAMS, secrets_with_values=frozenset())
    found = [d for d in _found({}, no_values) if d.path == ROUTE]
    assert [(d.code, d.severity) for d in found] == [("SP-4015", "error")]
    assert "strataplane secrets set INFLUX_TOKEN" in found[0].message
    every = frozenset(d.message.split("'")[1] for d in _found({}, no_values))
    assert _found({}, TreeContext(teams=TEAMS, secrets_with_values=every)) == []
    elsewhere = TreeContext(
        teams=TEAMS, secrets_with_values=frozenset(), changed_paths=frozenset({BUNDLE})
    )
    assert _found({}, elsewhere) == []


def test_owner_is_checked_only_for_changed_files() -> None:
    changes = sub(ROUTE, 'owner = "observability"', 'owner = "gone"')
    only_layer = TreeContext(teams=TEAMS, changed_paths=frozenset({LAYER}))
    assert _found(changes, only_layer) == []
    assert [
        d.code for d in _found(changes, TreeContext(teams=TEAMS, changed_paths=frozenset({ROUTE})))
    ] == ["SP-2006"]


def test_warnings_do_not_fail_validation() -> None:
    result = validate_tree(_tree(sub(LAYER, 'os = "linux"', 'os = "Linux"')), CTX)
    assert [d.severity for d in result.diagnostics] == ["warning"]
    assert result.ok


def test_one_broken_field_gives_one_diagnostic() -> None:
    found = _found(sub(LAYER, 'agentKind = "telegraf"', "agentKind = 7"))
    assert [(d.code, d.pointer) for d in found] == [("SP-2003", "agentKind")]


def test_ordering_is_deterministic() -> None:
    changes = {
        **sub(LAYER, "precedence = 100", 'precedence = "x"'),
        BUNDLE: None,
        "zz/bad": "",
        "a.toml": "",
    }
    found = _found(changes)
    assert found == sort_diagnostics(reversed(found))
    assert [d.path for d in found] == sorted(d.path or "" for d in found)
    assert found == _found(dict(reversed(list(changes.items()))))


def test_check_edit() -> None:
    ok = check_edit("layers/a.toml", b"# c\nowner = 'web'\n")
    assert ok.ok
    assert ok.canonical is not None
    assert ok.canonical.content == b'owner = "web"\n'
    assert [d.code for d in ok.diagnostics] == ["SP-1006"]
    assert [d.code for d in check_edit("layers/A.toml", b"").diagnostics] == ["SP-1002"]
    bad = check_edit("layers/a.toml", b"x = nan\ny = 1979-05-27\n")
    assert not bad.ok
    assert [d.code for d in bad.diagnostics] == ["SP-1004", "SP-1004"]
    assert all(d.path == "layers/a.toml" for d in bad.diagnostics)


def test_diagnostic_json_and_truncation() -> None:
    d = Diagnostic("SP-4001", LAYER, "bundles[0].name", 'Bundle "x" does not exist')
    assert d.to_json() == {
        "code": "SP-4001",
        "severity": "error",
        "path": LAYER,
        "pointer": "bundles[0].name",
        "message": 'Bundle "x" does not exist',
        "agent": None,
        "artifact": None,
    }
    many = [Diagnostic("SP-3005", f"layers/{i}.toml", None, "m") for i in range(150)]
    many += [Diagnostic(f"SP-{c}", "x", None, "m") for c in CODES if c != "SP-3005"] * 30
    kept, dropped = truncate(many)
    assert len(kept) == 1000
    assert dropped == len(many) - 1000
    assert sum(d.code == "SP-3005" for d in kept) == 100


def test_index_columns() -> None:
    values = validate_tree(_tree({}), CTX).values
    layer = index_columns(LAYER, values[LAYER])
    assert (layer.kind, layer.name, layer.owner_team, layer.agent_kind) == (
        "Layer",
        "base",
        "platform",
        "telegraf",
    )
    assert (layer.agent_versions, layer.precedence) == (">=1.37, <2", 100)
    assert layer.selector == {"matchLabels": {"os": "linux"}}
    journey = index_columns(JOURNEY, values[JOURNEY])
    assert (journey.agent_kind, journey.selector, journey.precedence) == (
        "strataplane-agent",
        {},
        None,
    )
    secret = index_columns(SECRET, values[SECRET])
    assert (secret.agent_kind, secret.selector, secret.agent_versions) == (None, None, None)
    bundle = index_columns(BUNDLE, values[BUNDLE])
    assert (bundle.agent_kind, bundle.precedence) == ("telegraf", None)
    assert index_columns("layers/x.toml", {"owner": "a", "agentKind": "vector"}).precedence == 0


def test_telegraf_tls_files_are_paths_or_env_references_and_cert_goes_with_key() -> None:
    tls = '[telegraf.tls]\nca = "/etc/telegraf/ca.pem"\ncert = "env://AGENT_CERT"\n'
    good = {SETTINGS_: BASE[SETTINGS_] + tls + 'key = "/etc/telegraf/agent.key"\n'}
    assert _found(good) == []
    alone = _found({SETTINGS_: BASE[SETTINGS_] + tls})
    assert [(d.code, d.pointer) for d in alone] == [("SP-2001", "telegraf.tls")]
    assert "'key'" in alone[0].message
    for value, why in (
        ("secret://AGENT_KEY", "secret:// is not allowed"),
        ("env://1BAD", "invalid reference"),
        ("/etc/${HOST}.key", "invalid file path"),
        ("", "invalid file path"),
    ):
        found = _found({SETTINGS_: BASE[SETTINGS_] + tls + f'key = "{value}"\n'})
        assert [(d.code, d.pointer) for d in found] == [("SP-2004", "telegraf.tls.key")], value
        assert why in found[0].message
