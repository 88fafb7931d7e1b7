"""Tree hash and change-set digest: the documented vectors and their properties."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strataplane.domain.tree import (
    EMPTY_TREE_HASH,
    apply_overlay,
    change_set_digest,
    diff_trees,
    normalize_overlay,
    tree_hash,
)

A = bytes.fromhex("1037fe785a2d905062702c0f261139381f439ab92eb0b1a7cf18fab1ad10b8da")
B = bytes.fromhex("32189c8bd7a054d03a8fce39112c3ff1cc85899786d8ff2535fd63e8f7b86574")

paths = st.sampled_from(
    [
        "settings.toml",
        "layers/a.toml",
        "layers/b.toml",
        "layers/a.b.toml",
        "bundles/x.toml",
        "secrets/K.toml",
        "secrets/k.toml",
        "routes/z.toml",
    ]
)
hashes = st.binary(min_size=32, max_size=32)
trees = st.dictionaries(paths, hashes)
overlays = st.dictionaries(paths, st.none() | hashes)


def test_vectors() -> None:
    assert tree_hash({}) == EMPTY_TREE_HASH == hashlib.sha256(b"").digest()
    assert (
        EMPTY_TREE_HASH.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert tree_hash({"layers/base.toml": B, "settings.toml": A}).hex() == (
        "ac5c8ff48f160938038d9576a5658b7d0969bb44f61149c2c2467d895d7f5708"
    )
    assert change_set_digest(1, {}).hex() == (
        "cd2662154e6d76b2b2b92e70c0cac3ccf534f9b74eb5b89819ec509083d00a50"
    )
    assert change_set_digest(2, {"bundles/x.toml": A, "settings.toml": None}).hex() == (
        "adf4e5fadc60e44e297e29630bf37d30cfa5f0965e946bc8070d839a38ee7427"
    )


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="bytes"):
        tree_hash({"a": b"short"})
    with pytest.raises(ValueError, match="NUL"):
        change_set_digest(1, {"a\x00": None})
    with pytest.raises(ValueError, match="64"):
        change_set_digest(-1, {})


@settings(max_examples=100)
@given(trees, st.randoms(use_true_random=False))
def test_tree_hash_ignores_input_order(tree: dict[str, bytes], rnd: object) -> None:
    items = list(tree.items())
    rnd.shuffle(items)  # type: ignore[attr-defined]
    assert tree_hash(dict(items)) == tree_hash(tree)


@settings(max_examples=100)
@given(st.integers(1, 2**40), overlays, paths, st.none() | hashes)
def test_digest_changes_with_any_overlay_change(
    base: int, overlay: dict[str, bytes | None], path: str, blob: bytes | None
) -> None:
    digest = change_set_digest(base, overlay)
    assert change_set_digest(base + 1, overlay) != digest
    changed = {**overlay, path: blob}
    assert (change_set_digest(base, changed) == digest) == (changed == overlay)
    if overlay:
        fewer = dict(list(overlay.items())[1:])
        assert change_set_digest(base, fewer) != digest


@settings(max_examples=100)
@given(trees, trees)
def test_diff_and_apply(old: dict[str, bytes], new: dict[str, bytes]) -> None:
    overlay = diff_trees(old, new)
    assert apply_overlay(old, overlay) == new
    assert normalize_overlay(old, overlay) == overlay
    assert tree_hash(apply_overlay(old, overlay)) == tree_hash(new)
