"""The poll schedule of ``agentbus task wait``: bounded, growing while nothing changes, back
to the first interval after a change. The wait itself runs against the real gateway in
packages/agentbus/tests (test_e2e_sidecars.py, test_e2e_sidecar_edges.py)."""

from __future__ import annotations

from agentbus_sidecar.actions.task_wait import FIRST_POLL_S, MAX_POLL_S, next_poll_s
from hypothesis import given
from hypothesis import strategies as st


@given(st.lists(st.booleans(), max_size=60))
def test_polls_stay_bounded_grow_when_quiet_and_restart_after_a_change(
    changes: list[bool],
) -> None:
    delay = next_poll_s(None, changed=False)
    assert delay == FIRST_POLL_S
    for changed in changes:
        following = next_poll_s(delay, changed)
        assert FIRST_POLL_S <= following <= MAX_POLL_S
        if changed:
            assert following == FIRST_POLL_S
        else:
            assert following >= delay
            assert following == MAX_POLL_S or following > delay
        delay = following


def test_a_quiet_wait_reaches_the_longest_interval_within_a_few_polls() -> None:
    delay, polls = next_poll_s(None, changed=False), 1
    while delay < MAX_POLL_S:
        delay, polls = next_poll_s(delay, changed=False), polls + 1
    assert polls <= 8
