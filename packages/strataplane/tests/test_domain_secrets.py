"""Properties of the secrets' pure rules: who may receive a value (domain/secret_grants.py)
and the syslog messages of audit events (domain/syslog.py)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from strataplane.domain.secret_grants import GRANT, MIN_ASSURANCE, policy_of, withheld
from strataplane.domain.syslog import PRI, frame_tcp, message

KINDS = st.sampled_from(["telegraf", "vector", "elastic-agent", "strataplane-agent"])
LABELS = st.dictionaries(
    st.sampled_from(["env", "role", "site"]), st.sampled_from(["prod", "dev", "web"]), max_size=3
)
LEVEL = st.sampled_from(["low", "high"])


@given(labels=LABELS, kind=KINDS, assurance=LEVEL)
def test_an_empty_grant_and_low_minimum_admit_everyone(
    labels: dict[str, str], kind: str, assurance: str
) -> None:
    assert withheld(policy_of("X", {"owner": "o", "grant": {}}), kind, labels, assurance) is None


@given(
    labels=LABELS, kind=KINDS, assurance=LEVEL, minimum=LEVEL, env=st.sampled_from(["prod", "dev"])
)
def test_high_assurance_never_receives_less_than_low(
    labels: dict[str, str], kind: str, assurance: str, minimum: str, env: str
) -> None:
    table = {"owner": "o", "minAssurance": minimum, "grant": {"matchLabels": {"env": env}}}
    policy = policy_of("X", table)
    low, high = withheld(policy, kind, labels, "low"), withheld(policy, kind, labels, "high")
    if low is None:
        assert high is None
    assert high in (None, GRANT)
    if labels.get("env") != env:
        assert low == high == GRANT
    elif minimum == "high":
        assert (low, high) == (MIN_ASSURANCE, None)


@given(labels=LABELS, kind=KINDS, kinds=st.lists(KINDS, max_size=3))
def test_agent_kinds_limit_the_grant(labels: dict[str, str], kind: str, kinds: list[str]) -> None:
    policy = policy_of("X", {"owner": "o", "grant": {"agentKinds": kinds}})
    assert (withheld(policy, kind, labels, "high") is None) == (kind in kinds)


def test_a_grant_that_does_not_parse_grants_nothing() -> None:
    policy = policy_of("X", {"owner": "o", "grant": {"matchLabels": 7}})
    assert withheld(policy, "telegraf", {}, "high") == GRANT
    assert withheld(policy_of("X", {"owner": "o"}), "telegraf", {}, "high") == GRANT


EVENTS = st.fixed_dictionaries(
    {
        "tenant_id": st.uuids().map(str),
        "seq": st.integers(1, 2**63 - 1),
        "ts": st.just("2026-12-05T20:00:00.000000Z"),
        "action": st.text(max_size=60),
        "details": st.dictionaries(st.text(max_size=10), st.text(max_size=30), max_size=3),
    }
)


@given(event=EVENTS, hostname=st.text(max_size=300))
def test_syslog_headers_are_printable_ascii_and_the_body_is_the_event(
    event: dict[str, object], hostname: str
) -> None:
    msg = message(event, hostname)
    header, bom, body = msg.partition(b" \xef\xbb\xbf")
    assert bom
    assert header.startswith(f"<{PRI}>1 ".encode())
    assert all(0x20 <= b <= 0x7E for b in header)
    fields = header.split(b" ", 6)
    assert len(fields[2]) <= 255  # HOSTNAME
    assert len(fields[5]) <= 32  # MSGID
    assert f'seq="{event["seq"]}"]'.encode() in header
    assert json.loads(body) == event
    framed = frame_tcp(msg)
    length, _, rest = framed.partition(b" ")
    assert int(length) == len(rest) == len(msg)
