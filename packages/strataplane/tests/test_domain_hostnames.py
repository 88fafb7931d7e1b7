"""RFC 1123 host names: what enrollment and heartbeats accept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strataplane.domain.hostnames import MAX_HOST_NAME, is_host_name

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
label = st.builds(
    lambda first, middle, last: first + middle + last,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "-", max_size=61),
    st.sampled_from(_ALNUM),
) | st.sampled_from(list(_ALNUM))


@pytest.mark.parametrize(
    "name",
    ["web-17", "web-17.example.com", "3com.example", "a", "x." * 126 + "y", "host.example."],
)
def test_names_accepted(name: str) -> None:
    assert is_host_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "not a host name!!",
        "",
        ".",
        "-web",
        "web-",
        "a..b",
        "under_score",
        "a" * 64,
        "x." * 127 + "y",
        "nul\x00",
        "caf\u00e9",
        "host..",
    ],
)
def test_names_refused(name: str) -> None:
    assert not is_host_name(name)


@given(st.lists(label, min_size=1, max_size=8))
def test_labels_joined_are_names_within_the_length(labels: list[str]) -> None:
    name = ".".join(labels)
    assert is_host_name(name) == (len(name) <= MAX_HOST_NAME)


@given(st.lists(label, min_size=1, max_size=4), st.sampled_from(" !_/@\x00\t\u00e9"))
def test_a_character_outside_the_alphabet_is_refused(labels: list[str], bad: str) -> None:
    assert not is_host_name(".".join(labels) + bad)
