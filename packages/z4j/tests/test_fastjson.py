"""The brain's orjson paths give the same answers as the standard encoder."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from wirekit.canonical import canonical_json, canonical_json_parsed
from z4j.fastjson import canonical_candidate, dumps
from z4j_agent.protocol import FrameSigner, FrameVerifier, Session

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children),
    max_leaves=12,
)


def _session() -> Session:
    return Session(b"k" * 32, "agent", "project", "session")


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_frames_the_agent_signs_verify_with_the_faster_encoder(payload: Any) -> None:
    signer = FrameSigner(_session())
    verifier = FrameVerifier(_session(), faster=canonical_candidate)
    wire = canonical_json(signer.sign("heartbeat", {"value": payload}))
    assert verifier.verify(json.loads(wire))["payload"] == json.loads(wire)["payload"]


def test_floats_orjson_writes_differently_still_verify() -> None:
    parsed = json.loads(json.dumps({"f": 1e16, "g": 1.5e-7}))
    assert canonical_candidate(parsed) != canonical_json_parsed(parsed)
    signer = FrameSigner(_session())
    frame = json.loads(canonical_json(signer.sign("heartbeat", parsed)))
    assert FrameVerifier(_session(), faster=canonical_candidate).verify(frame)["payload"] == parsed


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_dumps_reads_back_as_the_same_value(value: Any) -> None:
    assert json.loads(dumps(value)) == value
