"""The catalog's pure rules: signatures, the bundle a version uses, and the check of options
against the shipped Telegraf bundles (generated from Telegraf's sources)."""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache

import zstandard
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from strataplane.catalog import shipped_bundles, trusted_keys
from strataplane.domain.catalog import (
    Bundle,
    check_plugin,
    check_telegraf,
    parse_bundle,
    pick_bundle,
    plugin_line,
    verify_signature,
)
from strataplane.simulate.telegraf_load import startup_error


@lru_cache
def shipped() -> dict[str, tuple[bytes, str]]:
    out = {}
    for path, sig in shipped_bundles():
        body = zstandard.ZstdDecompressor().decompress(path.read_bytes())
        out[json.loads(body)["version"]] = (body, sig.read_text())
    return out


def bundle(version: str = "1.39.3") -> Bundle:
    return parse_bundle(shipped()[version][0])


def raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_the_project_ships_signed_bundles_of_every_supported_release_line() -> None:
    assert set(shipped()) == {"1.37.3", "1.38.4", "1.39.3"}
    for body, sig in shipped().values():
        assert verify_signature(body, sig, trusted_keys()) == hashlib.sha256(body).digest()
    b = bundle()
    for section in ("inputs", "outputs", "processors", "aggregators", "parsers", "serializers"):
        assert len(b.plugins[section]) >= 9, section
    assert len(b.plugins["secretstores"]) >= 5
    cpu = b.plugins["inputs"]["cpu"]
    assert cpu["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert cpu["properties"]["percpu"]["type"] == "boolean"
    assert cpu["additionalProperties"] is False


def test_shipped_schemas_are_valid_2020_12_schemas() -> None:
    # a sample of every section: the generator writes them all alike, and the metaschema check
    # costs ~50 ms a schema
    from jsonschema import Draft202012Validator

    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    for section in bundle().plugins.values():
        for name in sorted(section)[:3]:
            assert not list(meta.iter_errors(section[name])), name
    for name in ("cpu", "http", "disk"):
        assert not list(meta.iter_errors(bundle().plugins["inputs"][name])), name


@given(st.binary(min_size=1, max_size=64), st.integers(0, 63))
def test_a_changed_byte_or_an_unknown_key_never_verifies(extra: bytes, at: int) -> None:
    key = Ed25519PrivateKey.generate()
    body = b'{"format":1}' + extra
    sig = base64.b64encode(key.sign(hashlib.sha256(body).digest())).decode()
    assert verify_signature(body, sig, [raw(key)]) is not None
    i = at % len(body)
    tampered = body[:i] + bytes([body[i] ^ 1]) + body[i + 1 :]
    assert verify_signature(tampered, sig, [raw(key)]) is None
    assert verify_signature(body, sig, [raw(Ed25519PrivateKey.generate())]) is None
    assert verify_signature(body, "not base64!", [raw(key)]) is None


@given(
    st.lists(st.tuples(st.integers(1, 2), st.integers(0, 50), st.integers(0, 9)), max_size=8),
    st.tuples(st.integers(1, 2), st.integers(0, 50), st.integers(0, 9)),
)
def test_a_version_uses_its_own_bundle_or_its_release_lines_newest(
    bundles: list[tuple[int, int, int]], agent: tuple[int, int, int]
) -> None:
    versions = [".".join(map(str, v)) for v in bundles]
    wanted = ".".join(map(str, agent))
    chosen = pick_bundle(versions, wanted)
    same_line = [v for v in bundles if v[:2] == agent[:2]]
    if wanted in versions:
        assert chosen == wanted
    elif not same_line:
        assert chosen is None
    else:
        assert chosen == ".".join(map(str, max(same_line)))
    assert pick_bundle(versions, None) is None


def test_unknown_plugin_names_a_fix() -> None:
    [f] = check_plugin(bundle(), "inputs", "cpuu", {"percpuu": "yes"})
    assert f.option is None
    assert "unknown plugin" in f.message
    assert f.fix == "did you mean inputs.cpu?"


def test_unknown_and_mistyped_options() -> None:
    found = check_plugin(bundle(), "inputs", "cpu", {"percpuu": True, "totalcpu": "yes"})
    by_option = {f.option: f for f in found}
    assert by_option["percpuu"].fix == "did you mean percpu?"
    assert "must be boolean" in by_option["totalcpu"].message
    # the options every plugin has, and durations as Telegraf reads them
    assert check_plugin(bundle(), "inputs", "cpu", {"interval": "10s", "alias": "x"}) == []
    assert check_plugin(bundle(), "inputs", "cpu", {"interval": 10}) == []
    assert check_plugin(bundle(), "inputs", "disk", {"mount_points": ["/", 3]})[0].option == (
        "mount_points"
    )


def test_an_option_removed_in_a_later_release_is_unknown_there() -> None:
    # inputs.gnmi lost dump_responses between the 1.37 and 1.39 release lines
    assert check_plugin(bundle("1.37.3"), "inputs", "gnmi", {"dump_responses": True}) == []
    [f] = check_plugin(bundle("1.39.3"), "inputs", "gnmi", {"dump_responses": True})
    assert f.option == "dump_responses"
    assert "1.39.3" in f.message


def test_parser_options_follow_data_format() -> None:
    ok = {"urls": ["http://x"], "data_format": "json", "json_query": "a"}
    assert check_plugin(bundle(), "inputs", "http", ok) == []
    found = check_plugin(bundle(), "inputs", "http", {**ok, "data_format": "jsn"})
    [f] = [f for f in found if f.option == "data_format"]
    assert f.fix == 'did you mean data_format = "json"?'
    [g] = check_plugin(bundle(), "inputs", "http", {**ok, "json_querry": "a"})
    assert g.option == "json_querry"


def test_the_line_of_a_finding_in_rendered_toml() -> None:
    text = (
        '[agent]\ninterval = "10s"\n\n[[inputs.cpu]]\nalias = "a"\npercpu = true\n\n'
        '[[inputs.cpu]]\nalias = "b"\npercpuu = true\n'
    )
    import tomllib

    [f] = check_telegraf(bundle(), tomllib.loads(text))
    assert (f.alias, f.option) == ("b", "percpuu")
    assert plugin_line(text, f) == 10


def test_the_simulated_telegraf_refuses_what_its_loader_refuses() -> None:
    def cfg(**inputs: object) -> dict[str, object]:
        return {"inputs": inputs}

    assert startup_error(cfg(cpu=[{"percpu": True}]), "1.39.1") is None
    assert startup_error(cfg(cpuu=[{}]), "1.39.1") == "undefined but requested input: cpuu"
    assert "were not used" in (startup_error(cfg(cpu=[{"percpuu": 1}]), "1.39.1") or "")
    both = cfg(http=[{"urls": ["http://x"], "token": "a", "token_file": "/t"}])
    assert startup_error(both, "1.39.1") == (
        "could not initialize input http: either use 'token_file' or 'token' not both"
    )
