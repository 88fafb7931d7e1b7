"""Canonical TOML: the §7 example and vectors, every rejection, and the §7.5 properties."""

from __future__ import annotations

import math
import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strataplane.domain.spec.canonical import (
    MAX_BYTES,
    blob_hash,
    canonical_bytes,
    canonicalize,
    has_comments,
    parse,
)
from strataplane.domain.spec.diagnostics import SpecError

SETTINGS = settings(
    max_examples=int(os.environ.get("SP_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

SUBMITTED = b"""# Production Linux layer
owner = 'platform'
agentKind = "telegraf"
precedence = 0x64
selector = { matchLabels = { os = "linux", "host.kind" = "server" } }

[[bundles]]
name = "linux-system"
params = { interval = "30s" }

[config.inputs.cpu.default]
percpu = false
"""

STORED = b"""agentKind = "telegraf"
owner = "platform"
precedence = 100

[[bundles]]
name = "linux-system"

[bundles.params]
interval = "30s"

[config.inputs.cpu.default]
percpu = false

[selector.matchLabels]
"host.kind" = "server"
os = "linux"
"""


def test_the_documented_example() -> None:
    result = canonicalize(SUBMITTED)
    assert result.content == STORED
    assert result.hash == blob_hash(STORED)
    assert [d.code for d in result.notices] == ["SP-1006"]
    assert canonicalize(STORED).notices == ()


def test_blob_hash_vectors() -> None:
    one = canonical_bytes({"owner": "platform"})
    assert one == b'owner = "platform"\n'
    assert len(one) == 19
    assert blob_hash(one).hex() == (
        "1037fe785a2d905062702c0f261139381f439ab92eb0b1a7cf18fab1ad10b8da"
    )
    two = canonical_bytes({"owner": "platform", "agentKind": "telegraf"})
    assert blob_hash(two).hex() == (
        "32189c8bd7a054d03a8fce39112c3ff1cc85899786d8ff2535fd63e8f7b86574"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({}, ""),
        ({"f": 1e20}, "f = 1e20\n"),
        ({"f": 1.5e-7}, "f = 1.5e-7\n"),
        ({"f": 0.1}, "f = 0.1\n"),
        ({"f": 100.0}, "f = 100.0\n"),
        ({"f": -0.0}, "f = -0.0\n"),
        ({"i": -(2**63)}, "i = -9223372036854775808\n"),
        ({"b": [True, False]}, "b = [true, false]\n"),
        ({"s": 'a\tb\x7f\x01"\\'}, 's = "a\\tb\\u007F\\u0001\\"\\\\"\n'),
        ({"s": "é😀"}, 's = "é😀"\n'),
        ({"s": "x\ny"}, 's = """\nx\ny"""\n'),
        ({"a": ["x\ny"]}, 'a = ["x\\ny"]\n'),
        ({"a": [1, {"k": {"z": 1, "a": []}}]}, "a = [1, { k = { a = [], z = 1 } }]\n"),
        ({"a": [{}]}, "[[a]]\n"),
        ({"": 1, "a b": {}, "c.d": 2}, '"" = 1\n"c.d" = 2\n\n["a b"]\n'),
        ({"t": {"u": {"v": {}}}}, "[t.u.v]\n"),
        (
            {"t": {"x": 1, "u": [{"y": 2}, {"z": {"w": 3}}]}},
            ("[t]\nx = 1\n\n[[t.u]]\ny = 2\n\n[[t.u]]\n\n[t.u.z]\nw = 3\n"),
        ),
    ],
)
def test_layout(value: dict[str, Any], text: str) -> None:
    assert canonical_bytes(value) == text.encode()
    assert _typed(parse(text.encode())) == _typed(value)


def test_bom_and_line_endings_are_not_content() -> None:
    assert canonicalize(b'\xef\xbb\xbfa = 1\r\nb = "x"\r\n').content == b'a = 1\nb = "x"\n'


def _codes(data: bytes) -> list[str]:
    with pytest.raises(SpecError) as info:
        canonicalize(data)
    return [d.code for d in info.value.diagnostics]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"a = 1\nb = \xff\n", "SP-1003"),
        (b"a = \n", "SP-1003"),
        (b"a = 1\na = 2\n", "SP-1003"),
        (b"d = 1979-05-27\n", "SP-1004"),
        (b"d = 1979-05-27T07:32:00Z\n", "SP-1004"),
        (b"t = 07:32:00\n", "SP-1004"),
        (b"f = nan\n", "SP-1004"),
        (b"f = -inf\n", "SP-1004"),
        (b"i = 9223372036854775808\n", "SP-1004"),
        (b's = "a\\u0000b"\n', "SP-1004"),
        (b'"k\\u0001" = 1\n', "SP-1004"),
        (b"a = " + b"[" * 33 + b"]" * 33 + b"\n", "SP-1005"),
        (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "SP-1005"),
    ],
)
def test_rejections(data: bytes, code: str) -> None:
    assert code in _codes(data)


def test_messages_carry_line_and_column() -> None:
    with pytest.raises(SpecError) as info:
        canonicalize(b"a = 1\nb = \xff\n")
    assert "line 2, column 5" in info.value.diagnostics[0].message
    with pytest.raises(SpecError) as info:
        canonicalize(b"a = 1\nb = \n")
    assert "line 2" in info.value.diagnostics[0].message


def test_nesting_limit_is_32() -> None:
    assert canonicalize(b"a = " + b"[" * 32 + b"]" * 32 + b"\n").content
    header = ".".join(["k"] * 32).encode()
    assert canonicalize(b"[" + header + b"]\n").content == b"[" + header + b"]\n"
    assert _codes(b"[" + header + b".k]\n") == ["SP-1005"]


def test_size_limit() -> None:
    fits = {"s": "x" * (MAX_BYTES - len('s = ""\n'))}
    assert len(canonical_bytes(fits)) == MAX_BYTES
    with pytest.raises(SpecError) as info:
        canonical_bytes({"s": "x" * MAX_BYTES})
    assert info.value.diagnostics[0].code == "SP-1005"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a = 1 # c", True),
        ("# only", True),
        ('a = "# not"', False),
        ("a = '# not'", False),
        ('a = """\n# not\n"""', False),
        ('a = """x""""\nb = 1 # yes', True),
        ("a = '''x'''''\nb = '#'", False),
        ('a = "\\"#"', False),
        ("a = [1, # yes\n 2]", True),
    ],
)
def test_comment_detection(text: str, found: bool) -> None:
    parse(text.encode())  # the detector assumes valid TOML
    assert has_comments(text) is found


# --- properties ---------------------------------------------------------------------------

# Characters chosen to stress quoting and escaping; full Unicode ranges add little but time.
_ALPHABET = list("\n\t\r\x01\x1f\x7f\"'\\#=[]{}., aZ09_-é€😀\u2028\ufeff")
_text = st.text(st.sampled_from(_ALPHABET), max_size=6)
_keys = st.one_of(
    st.sampled_from(["a", "b", "a.b", "", "x y"]), _text.filter(lambda k: k.isprintable())
)
_scalars = st.one_of(
    _text,
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=10,
)
documents = st.dictionaries(_keys, _values, max_size=5)


def _typed(value: Any) -> Any:
    """A form in which 1, 1.0, True and "1" differ, and -0.0 differs from 0.0."""
    if isinstance(value, dict):
        return ("table", sorted((k, _typed(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", [_typed(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


@SETTINGS
@given(documents)
def test_canonical_form_is_a_fixed_point_and_loses_nothing(doc: dict[str, Any]) -> None:
    content = canonical_bytes(doc)
    parsed = parse(content)
    assert _typed(parsed) == _typed(doc)
    assert canonical_bytes(parsed) == content
    assert canonicalize(content).content == content


@SETTINGS
@given(documents, st.randoms(use_true_random=False), st.randoms(use_true_random=False))
def test_formatting_variants_give_equal_bytes(doc: dict[str, Any], r1: Any, r2: Any) -> None:
    one, two = _messy(doc, r1), _messy(doc, r2)
    assert canonicalize(one.encode()).content == canonical_bytes(doc)
    assert canonicalize(two.encode()).content == canonical_bytes(doc)


_small = st.dictionaries(
    st.sampled_from(["a", "b"]),
    st.sampled_from([1, 1.0, True, "1", 0.0, -0.0, [], {}, [1], {"a": 1}]),
    max_size=2,
)


@SETTINGS
@given(_small, _small)
def test_equal_bytes_exactly_when_equal_typed_values(x: dict[str, Any], y: dict[str, Any]) -> None:
    assert (canonical_bytes(x) == canonical_bytes(y)) == (_typed(x) == _typed(y))


@SETTINGS
@given(documents)
def test_output_parses_under_an_independent_parser(doc: dict[str, Any]) -> None:
    tomlkit = pytest.importorskip("tomlkit")
    other = tomlkit.parse(canonical_bytes(doc).decode()).unwrap()
    assert _typed(other) == _typed(doc)


# A deliberately untidy TOML writer: shuffled keys, inline or header tables, literal and
# escaped strings, hex and underscored integers, comments and blank lines.


def _messy(doc: dict[str, Any], rnd: random.Random) -> str:
    lines: list[str] = []
    if rnd.random() < 0.3:
        lines.append("# leading comment")
    _messy_table(lines, [], doc, rnd, None)
    return "\n".join(lines) + "\n"


def _messy_table(
    lines: list[str], path: list[str], table: dict[str, Any], rnd: Any, hdr: Any
) -> None:
    dotted = ".".join(_messy_key(k, rnd) for k in path)
    if hdr == "table":
        lines.append(f"{rnd.choice(['', ' '])}[{dotted}]")
    elif hdr == "array":
        lines.append(f"[[ {dotted} ]]")
    items = list(table.items())
    rnd.shuffle(items)
    later = []
    for key, value in items:
        is_aot = isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        if (isinstance(value, dict) or is_aot) and rnd.random() < 0.6:
            later.append((key, value))
            continue
        eq = rnd.choice(["=", " = ", "  =\t"])
        comment = rnd.choice(["", "", " # note"])
        lines.append(f"{_messy_key(key, rnd)}{eq}{_messy_value(value, rnd)}{comment}")
        if rnd.random() < 0.1:
            lines.append("")
    for key, value in later:
        if isinstance(value, dict):
            _messy_table(lines, [*path, key], value, rnd, "table")
        else:
            for element in value:
                _messy_table(lines, [*path, key], element, rnd, "array")


def _messy_key(key: str, rnd: Any) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    if bare and rnd.random() < 0.7:
        return key
    if "'" not in key and rnd.random() < 0.5:
        return f"'{key}'"
    return _messy_string(key, rnd, literal=False)


def _messy_string(text: str, rnd: Any, *, literal: bool = True) -> str:
    printable = all(c == "\t" or (c >= " " and c != "\x7f") for c in text)
    if literal and "'" not in text and printable and rnd.random() < 0.4:
        return f"'{text}'"
    out = []
    for c in text:
        if c in '"\\' or c < " " or c == "\x7f" or rnd.random() < 0.1:
            out.append(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _messy_value(value: Any, rnd: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value > 0 and rnd.random() < 0.3:
            return hex(value)
        if abs(value) >= 10 and rnd.random() < 0.3:
            sign = "-" if value < 0 else rnd.choice(["", "+"])
            digits = str(abs(value))
            return sign + digits[0] + "_" + digits[1:]
        return str(value)
    if isinstance(value, float):
        assert math.isfinite(value)
        return repr(value)
    if isinstance(value, str):
        return _messy_string(value, rnd)
    if isinstance(value, list):
        sep = str(rnd.choice([",", ", ", " ,\n  "]))
        trailing = "," if value and rnd.random() < 0.3 else ""
        return "[" + sep.join(_messy_value(v, rnd) for v in value) + trailing + "]"
    items = list(value.items())
    rnd.shuffle(items)
    pairs = ", ".join(f"{_messy_key(k, rnd)} = {_messy_value(v, rnd)}" for k, v in items)
    return "{" + pairs + "}"
