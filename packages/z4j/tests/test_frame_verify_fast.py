"""The brain checks signatures over orjson's encoding first; every frame an agent signs
still verifies, and nothing else does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from platformkit.fastjson import canonical_candidate
from wirekit.canonical import canonical_json
from z4j_agent.protocol import FrameError, FrameSigner, FrameVerifier, Session

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
def test_frames_the_agent_signs_verify(payload: Any) -> None:
    signer = FrameSigner(_session())
    verifier = FrameVerifier(_session(), faster=canonical_candidate)
    frame = json.loads(canonical_json(signer.sign("heartbeat", {"value": payload})))
    assert verifier.verify(frame)["payload"] == {"value": payload}


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_a_changed_frame_does_not_verify(payload: Any) -> None:
    signer = FrameSigner(_session())
    frame = json.loads(canonical_json(signer.sign("heartbeat", {"value": payload})))
    frame["payload"]["other"] = 1
    with pytest.raises(FrameError, match="signature"):
        FrameVerifier(_session(), faster=canonical_candidate).verify(frame)
