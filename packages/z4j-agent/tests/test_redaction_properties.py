"""Properties of redaction: idempotent, leaves no secret, never adds any, keeps clean text."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from z4j_agent.events import (
    make_event,
    redact_event_data,
    redact_received_event_data,
    redact_received_events_data,
)
from z4j_agent.redaction import (
    REDACTED,
    RedactionLimits,
    find_secrets,
    is_redacted_json,
    redact,
    redact_text,
    redacted_json_flags,
)

# Z4J_HYPOTHESIS_EXAMPLES raises the count for a deeper local run (8000 passes in ~3 min).
SETTINGS = settings(
    max_examples=int(os.environ.get("Z4J_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

# Text made of the characters the patterns care about, so collisions actually get explored.
tricky_text = st.lists(
    st.sampled_from(
        [
            *list("aAkKeEyYpP=:\"' \t\n/@.-_[]{}()&;,xX0123456789"),
            "password",
            "token",
            "Bearer ",
            "eyJ",
            "://",
            "AKIA",
            "Cookie",
            "-----BEGIN PRIVATE KEY-----",
            "-----END PRIVATE KEY-----",
            "ghp_",
            "sk_live_",
            "xoxb-",
            "AIza",
            REDACTED,
            "api_key",
            "0123456789abcdef",
        ]
    ),
    max_size=40,
).map("".join)
any_text = st.one_of(st.text(max_size=200), tricky_text)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.one_of(any_text, st.sampled_from(["password", "token", "x"])), children, max_size=5
        )
    ),
    max_leaves=20,
)


@SETTINGS
@given(any_text)
def test_text_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@SETTINGS
@given(any_text, st.integers(min_value=40, max_value=200))
def test_bounded_text_redaction_is_idempotent(text: str, limit: int) -> None:
    once = redact_text(text * 3, max_length=limit)
    assert len(once) <= limit
    assert redact_text(once, max_length=limit) == once


@SETTINGS
@given(json_values)
def test_structure_redaction_is_idempotent_and_json_safe(value: Any) -> None:
    limits = RedactionLimits(max_depth=3, max_items=3, max_string=80)
    once = redact(value, limits=limits)
    json.dumps(once, allow_nan=False)
    assert redact(once, limits=limits) == once


@SETTINGS
@given(json_values)
def test_no_secret_survives_and_none_is_added(value: Any) -> None:
    before = len(find_secrets(value))
    after = find_secrets(redact(value))
    assert after == []
    assert len(after) <= before


secret_word = st.text(alphabet=ALNUM, min_size=12, max_size=30)
filler = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)

PLANTS = [
    lambda s: f"password={s}",
    lambda s: f"'api_key': '{s}'",
    lambda s: f'"clientSecret": "{s}"',
    lambda s: f"Authorization: Bearer {s}",
    lambda s: f"postgresql://user:{s}@db.internal:5432/app",
    lambda s: f"eyJ{s}.eyJ{s}.{s}",
    lambda s: f"ghp_{(s * 3)[:36]}",
    lambda s: f"xoxb-{s}",
    lambda s: f"sk_live_{s}",
    lambda s: f"-----BEGIN EC PRIVATE KEY-----\n{s}\n-----END EC PRIVATE KEY-----",
    lambda s: f"X-Auth-Token: {s}",
]


@SETTINGS
@given(filler, filler, secret_word, st.sampled_from(range(len(PLANTS))))
def test_planted_secrets_never_survive(before: str, after: str, secret: str, kind: int) -> None:
    assume(secret not in before and secret not in after)
    text = f"{before} {PLANTS[kind](secret)}\n{after}"
    assert secret not in redact_text(text)
    assert secret not in json.dumps(redact({"message": text, "args": [text]}))


@SETTINGS
@given(filler, secret_word)
def test_secret_under_a_sensitive_key_never_survives(other: str, secret: str) -> None:
    assume(secret not in other)
    out = redact({"kwargs": {"Password": secret, "note": other}, "token": [secret]})
    assert secret not in json.dumps(out)


plain_text = st.text(
    alphabet=st.sampled_from(list("abcdefghij KLMNO,.!?0123456789\n")), max_size=200
)


@SETTINGS
@given(plain_text)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert find_secrets(text) == []
    assert redact_text(text) == text
    assert redact({"message": text}) == {"message": text}


@SETTINGS
@given(st.one_of(st.text(max_size=300), tricky_text))
def test_shortcut_never_skips_a_secret(text: str) -> None:
    from z4j_agent.textsecrets import mask_all_rules, mask_text

    assert mask_text(text) == mask_all_rules(text)


@pytest.mark.parametrize(
    "planted",
    [
        "Bearer abcdefghijklmnop",
        "password=hunter2",
        "https://u:p4ss@host/x",
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_" + "a" * 36,
        "xoxb-1234567890-abc",
        "sk_live_1234567890ab",
        "AIza" + "b" * 35,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
        "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----",
    ],
)
def test_shortcut_lets_every_rule_see_its_trigger(planted: str) -> None:
    from z4j_agent.textsecrets import mask_all_rules, mask_text

    assert mask_text("x " + planted + " y") == mask_all_rules("x " + planted + " y")
    assert mask_text("x " + planted + " y") != "x " + planted + " y"


# What the brain holds after json.loads: JSON types only, infinities included.
received = json_values.map(lambda value: json.loads(json.dumps(value)))
plain_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | plain_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.one_of(plain_text, st.sampled_from(["token", "x"])), children)
    ),
    max_leaves=20,
).map(lambda value: json.loads(json.dumps(value)))


@SETTINGS
@given(st.one_of(received, plain_values))
def test_a_value_judged_redacted_is_its_own_redaction(value: Any) -> None:
    if is_redacted_json(value):
        assert redact(value) == value


@SETTINGS
@given(st.lists(st.one_of(received, plain_values), max_size=8))
def test_a_batch_is_judged_as_each_value_alone(values: list[Any]) -> None:
    assert redacted_json_flags(values) == [is_redacted_json(v) for v in values]


@SETTINGS
@given(
    st.lists(
        st.dictionaries(
            st.one_of(any_text, st.just("traceback")),
            st.one_of(received, plain_values),
            max_size=4,
        ),
        max_size=6,
    )
)
def test_a_received_batch_is_redacted_as_each_event_in_full(datas: list[dict[str, Any]]) -> None:
    datas = json.loads(json.dumps(datas))
    assert redact_received_events_data(datas) == [redact_event_data(d) for d in datas]


@pytest.mark.parametrize(
    "value",
    [
        {"password": "x"},
        ["a{", {"password": "x"}],
        {"a{": {"token": "x"}},
        ["{", '"{', {"api_key": "x"}],
        {"note": 'x"}', "secret": "x"},
        {'pass"word': "x"},
        {"x\\": 1, "cookie": "x"},
        [[], {}, [{"authorization": "x"}]],
    ],
)
def test_a_sensitive_key_is_found_wherever_it_stands(value: Any) -> None:
    # keys after strings that end in "{" or hold escapes, and in lists after other items
    value = json.loads(json.dumps(value))
    assert not is_redacted_json(value)
    assert redacted_json_flags([{"n": 1}, value]) == [True, False]


def test_one_secret_in_a_batch_sends_only_its_event_down_the_full_path() -> None:
    clean = [{"task_name": "app.tasks.add", "args": [n]} for n in range(3)]
    leaky = {"kwargs": {"note": "Authorization: Bearer abcdefghijklmnop"}}
    datas = json.loads(json.dumps([clean[0], leaky, clean[1], clean[2]]))
    out = redact_received_events_data(datas)
    assert [out[i] is datas[i] for i in range(4)] == [True, False, True, True]
    assert out[1] == redact_event_data(datas[1])


@SETTINGS
@given(
    st.dictionaries(
        st.one_of(any_text, st.just("traceback")), st.one_of(received, plain_values), max_size=6
    )
)
def test_received_event_data_is_redacted_as_in_full(data: dict[str, Any]) -> None:
    data = json.loads(json.dumps(data))
    assert redact_received_event_data(data) == redact_event_data(data)


def test_an_agent_event_skips_the_walk_on_receipt() -> None:
    data = make_event(
        "task.sent",
        "t-1",
        {"task_name": "app.tasks.add", "args": [1, "two"], "kwargs": {"password": "x", "n": 3}},
    )["data"]
    received_data = json.loads(json.dumps(data))
    assert is_redacted_json(received_data)
    assert redact_received_event_data(received_data) is received_data


@pytest.mark.parametrize(
    "data",
    [
        {"kwargs": {"api_key": "k"}},
        {"kwargs": {"api_key": REDACTED + "k"}},
        {"kwargs": {"api_key": [REDACTED]}},
        {"kwargs": {"clé": "v"}},
        {"kwargs": {"k" * 300: "v"}},
        {"args": ["x" * 20_000]},
        {"args": list(range(250))},
        {"args": [[[[[[[[[[[[[1]]]]]]]]]]]]]},
        {"args": [float("inf")]},
        {"result": "Authorization: Bearer abcdefghijklmnop"},
        {"traceback": ["not", "text"]},
    ],
)
def test_data_redaction_would_change_takes_the_full_path(data: dict[str, Any]) -> None:
    received_data = json.loads(json.dumps(data))
    assert redact_received_event_data(received_data) is not received_data
    assert redact_received_event_data(received_data) == redact_event_data(received_data)
