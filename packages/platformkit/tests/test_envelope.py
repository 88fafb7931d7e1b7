"""Keyring file, per-tenant data keys, the sealed format and the Envelope service."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import stat
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from platformkit.crypto import (
    DataKey,
    DataKeyUnavailableError,
    DecryptionError,
    Envelope,
    InMemoryDataKeyStore,
    Keyring,
    KeyringError,
    StoredDataKey,
    UnwrapError,
    WrappedDataKey,
    generate_keyring,
    new_data_key,
    open_sealed,
    seal,
    sealed_key_id,
    unwrap_data_key,
)
from platformkit.crypto import envelope as envelope_module

TENANT = uuid.UUID("0190f0a0-0000-7000-8000-000000000001")
OTHER = uuid.UUID("0190f0a0-0000-7000-8000-000000000002")
OWNER = "credential:42:secret"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def materials(path: Path) -> list[bytes]:
    return [base64.b64decode(k["key"]) for k in json.loads(path.read_text())["keys"]]


def leaks(text: str, material: bytes) -> bool:
    forms = [material.hex(), base64.b64encode(material).decode(), repr(material)[2:-1]]
    return any(form in text for form in forms)


@pytest.fixture
def keyring_path(tmp_path: Path) -> Path:
    return tmp_path / "keyring.json"


@pytest.fixture
def keyring(keyring_path: Path) -> Keyring:
    return generate_keyring(keyring_path)


@pytest.fixture(params=[0.0, 600.0], ids=["unwrap-each-use", "unwrapped-kept"])
def envelope(keyring: Keyring, request: pytest.FixtureRequest) -> Envelope:
    """Every service test runs with and without keeping unwrapped keys: keeping them must not
    change a single answer."""
    return Envelope(keyring, InMemoryDataKeyStore(), unwrapped_ttl_s=request.param)


def a_data_key(key_id: int = 1) -> DataKey:
    return DataKey(key_id, os.urandom(32))


# --- keyring file -----------------------------------------------------------------------------


def test_generate_creates_0600_file_even_with_open_umask(keyring_path: Path) -> None:
    old = os.umask(0)
    try:
        generate_keyring(keyring_path)
    finally:
        os.umask(old)
    assert mode_of(keyring_path) == 0o600
    doc = json.loads(keyring_path.read_text())
    assert doc["format"] == "platformkit-keyring/v1"
    assert doc["active"] == 1
    assert [k["id"] for k in doc["keys"]] == [1]
    assert len(materials(keyring_path)[0]) == 32


def test_generate_refuses_to_overwrite(keyring: Keyring, keyring_path: Path) -> None:
    before = keyring_path.read_bytes()
    with pytest.raises(FileExistsError):
        generate_keyring(keyring_path)
    assert keyring_path.read_bytes() == before


def test_load_roundtrip(keyring: Keyring, keyring_path: Path) -> None:
    loaded = Keyring.load(keyring_path)
    assert loaded.ids == [1]
    assert loaded.active_id == 1
    assert loaded.active().fingerprint == keyring.active().fingerprint
    assert (
        loaded.active().fingerprint == hashlib.sha256(materials(keyring_path)[0]).hexdigest()[:16]
    )


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o620, 0o602, 0o610])
def test_load_refuses_group_or_other_access(
    keyring: Keyring, keyring_path: Path, mode: int
) -> None:
    keyring_path.chmod(mode)
    with pytest.raises(KeyringError, match="chmod 600"):
        Keyring.load(keyring_path)
    keyring_path.chmod(0o600)
    assert Keyring.load(keyring_path).ids == [1]


@pytest.mark.parametrize("mode", [0o400, 0o600, 0o700])
def test_load_accepts_owner_only_modes(keyring: Keyring, keyring_path: Path, mode: int) -> None:
    keyring_path.chmod(mode)
    assert Keyring.load(keyring_path).ids == [1]


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyringError, match="no keyring"):
        Keyring.load(tmp_path / "absent.json")


@pytest.mark.parametrize(
    "doc",
    [
        "not json",
        json.dumps({"format": "other/v1", "active": 1, "keys": []}),
        json.dumps(
            {
                "format": "platformkit-keyring/v1",
                "active": 2,
                "keys": [{"id": 1, "key": base64.b64encode(bytes(32)).decode(), "created_at": "x"}],
            }
        ),
        json.dumps(
            {
                "format": "platformkit-keyring/v1",
                "active": 1,
                "keys": [{"id": 1, "key": base64.b64encode(bytes(16)).decode(), "created_at": "x"}],
            }
        ),
        json.dumps(
            {
                "format": "platformkit-keyring/v1",
                "active": 1,
                "keys": [{"id": 1, "key": "!!notbase64!!", "created_at": "x"}],
            }
        ),
        json.dumps(
            {
                "format": "platformkit-keyring/v1",
                "active": 1,
                "keys": [
                    {"id": 1, "key": base64.b64encode(bytes(32)).decode(), "created_at": "x"},
                    {"id": 1, "key": base64.b64encode(bytes(32)).decode(), "created_at": "x"},
                ],
            }
        ),
        json.dumps({"format": "platformkit-keyring/v1", "keys": []}),
    ],
)
def test_load_rejects_malformed(keyring_path: Path, doc: str) -> None:
    fd = os.open(keyring_path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, doc.encode())
    os.close(fd)
    with pytest.raises(KeyringError):
        Keyring.load(keyring_path)


def test_add_key_rotates_and_persists(keyring: Keyring, keyring_path: Path) -> None:
    first = keyring.active()
    second = keyring.add_key()
    assert (second.id, keyring.active_id, keyring.ids) == (2, 2, [1, 2])
    assert second.fingerprint != first.fingerprint
    assert mode_of(keyring_path) == 0o600
    assert sorted(p.name for p in keyring_path.parent.iterdir()) == ["keyring.json"]
    loaded = Keyring.load(keyring_path)
    assert (loaded.active_id, loaded.ids) == (2, [1, 2])
    assert loaded.get(1).fingerprint == first.fingerprint
    with pytest.raises(KeyringError, match="no key 3"):
        loaded.get(3)


def test_key_material_never_in_repr_str_or_logs(
    keyring: Keyring, keyring_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keyring.add_key()
    data_key = unwrap_data_key(keyring, new_data_key(keyring, TENANT), TENANT, key_id=1)
    objects = [keyring, keyring.get(1), keyring.get(2), data_key, Keyring.load(keyring_path)]
    with caplog.at_level(logging.INFO):
        for obj in objects:
            logging.getLogger("test").info("object %s / %r", obj, obj)
    texts = [repr(o) for o in objects] + [str(o) for o in objects] + [caplog.text]
    for material in materials(keyring_path):
        assert not any(leaks(text, material) for text in texts)
    assert keyring.get(1).fingerprint in repr(keyring)
    assert not hasattr(keyring.get(1), "__dict__")  # no stray attribute dumps via vars()


# --- data keys --------------------------------------------------------------------------------


def test_data_key_wrap_unwrap_and_bindings(keyring: Keyring) -> None:
    wrapped = new_data_key(keyring, TENANT)
    assert wrapped.kek_id == 1
    assert len(wrapped.wrapped) == 12 + 32 + 16
    key = unwrap_data_key(keyring, wrapped, str(TENANT), key_id=7)
    assert key.key_id == 7
    with pytest.raises(UnwrapError):
        unwrap_data_key(keyring, wrapped, OTHER, key_id=7)
    tampered = WrappedDataKey(1, wrapped.wrapped[:-1] + bytes([wrapped.wrapped[-1] ^ 1]))
    with pytest.raises(UnwrapError):
        unwrap_data_key(keyring, tampered, TENANT, key_id=7)
    with pytest.raises(UnwrapError, match="no key 9"):
        unwrap_data_key(keyring, WrappedDataKey(9, wrapped.wrapped), TENANT, key_id=7)
    keyring.add_key()
    with pytest.raises(UnwrapError):  # relabelled with another deployment key id
        unwrap_data_key(keyring, WrappedDataKey(2, wrapped.wrapped), TENANT, key_id=7)


def test_deployment_key_rotation_keeps_old_data_keys(keyring: Keyring, keyring_path: Path) -> None:
    old = new_data_key(keyring, TENANT)
    sealed = seal(
        unwrap_data_key(keyring, old, TENANT, key_id=1), b"v", tenant_id=TENANT, owner=OWNER
    )
    keyring.add_key()
    new = new_data_key(keyring, TENANT)
    assert (old.kek_id, new.kek_id) == (1, 2)
    reloaded = Keyring.load(keyring_path)
    old_key = unwrap_data_key(reloaded, old, TENANT, key_id=1)
    assert open_sealed(old_key, sealed, tenant_id=TENANT, owner=OWNER) == b"v"
    unwrap_data_key(reloaded, new, TENANT, key_id=2)


# --- sealed format ----------------------------------------------------------------------------


def test_sealed_layout() -> None:
    key = a_data_key(0x01020304)
    sealed = seal(key, b"hello", tenant_id=TENANT, owner=OWNER)
    assert sealed[0] == 1
    assert sealed[1:5] == bytes([1, 2, 3, 4])
    assert sealed_key_id(sealed) == 0x01020304
    assert len(sealed) == 1 + 4 + 12 + len(b"hello") + 16
    assert b"hello" not in sealed
    assert seal(key, b"hello", tenant_id=TENANT, owner=OWNER)[5:17] != sealed[5:17]


@settings(max_examples=50)
@given(st.binary(max_size=300), st.text(max_size=30), st.text(min_size=1, max_size=30))
def test_seal_open_roundtrip(plaintext: bytes, owner: str, tenant: str) -> None:
    key = a_data_key()
    sealed = seal(key, plaintext, tenant_id=tenant, owner=owner)
    assert open_sealed(key, sealed, tenant_id=tenant, owner=owner) == plaintext


@settings(max_examples=100)
@given(st.data())
def test_any_flipped_bit_is_rejected(data: st.DataObject) -> None:
    key = a_data_key()
    sealed = seal(key, b"account password", tenant_id=TENANT, owner=OWNER)
    index = data.draw(st.integers(0, len(sealed) - 1))
    bit = data.draw(st.integers(0, 7))
    tampered = bytearray(sealed)
    tampered[index] ^= 1 << bit
    with pytest.raises(DecryptionError):
        open_sealed(key, bytes(tampered), tenant_id=TENANT, owner=OWNER)


@pytest.mark.parametrize("cut", [0, 1, 5, 17, 32])
def test_truncated_is_rejected(cut: int) -> None:
    key = a_data_key()
    sealed = seal(key, b"x" * 20, tenant_id=TENANT, owner=OWNER)
    with pytest.raises(DecryptionError):
        open_sealed(key, sealed[:cut], tenant_id=TENANT, owner=OWNER)


def test_bound_to_tenant_owner_and_key() -> None:
    key = a_data_key()
    sealed = seal(key, b"secret", tenant_id=TENANT, owner=OWNER)
    assert open_sealed(key, sealed, tenant_id=str(TENANT), owner=OWNER) == b"secret"
    for tenant, owner in [(OTHER, OWNER), (TENANT, "credential:43:secret"), (TENANT, "")]:
        with pytest.raises(DecryptionError, match="authenticate"):
            open_sealed(key, sealed, tenant_id=tenant, owner=owner)
    with pytest.raises(DecryptionError, match="authenticate"):
        open_sealed(a_data_key(), sealed, tenant_id=TENANT, owner=OWNER)
    with pytest.raises(DecryptionError, match="another data key"):
        open_sealed(a_data_key(2), sealed, tenant_id=TENANT, owner=OWNER)


def test_header_is_authenticated() -> None:
    material = os.urandom(32)
    sealed = seal(DataKey(1, material), b"s", tenant_id=TENANT, owner=OWNER)
    relabelled = sealed[:1] + (2).to_bytes(4, "big") + sealed[5:]
    # Same key material under another id: only the header binding rejects it.
    with pytest.raises(DecryptionError, match="authenticate"):
        open_sealed(DataKey(2, material), relabelled, tenant_id=TENANT, owner=OWNER)


def test_tenant_and_owner_boundary_is_unambiguous() -> None:
    key = a_data_key()
    sealed = seal(key, b"s", tenant_id="a", owner="b:c")
    with pytest.raises(DecryptionError):
        open_sealed(key, sealed, tenant_id="a:b", owner="c")
    with pytest.raises(DecryptionError):
        open_sealed(key, sealed, tenant_id='a","b', owner=":c")


# --- Envelope service -------------------------------------------------------------------------


async def test_encrypt_creates_first_key_and_roundtrips(envelope: Envelope) -> None:
    sealed = await envelope.encrypt(TENANT, b"token", owner=OWNER)
    assert sealed_key_id(sealed) == 1
    assert await envelope.decrypt(TENANT, sealed, owner=OWNER) == b"token"
    assert await envelope.decrypt(str(TENANT), sealed, owner=OWNER) == b"token"
    again = await envelope.encrypt(TENANT, b"other", owner=OWNER)
    assert sealed_key_id(again) == 1


async def test_moved_to_other_tenant_or_owner_fails(envelope: Envelope) -> None:
    sealed = await envelope.encrypt(TENANT, b"token", owner=OWNER)
    with pytest.raises(DataKeyUnavailableError):  # the other tenant has no key 1 yet
        await envelope.decrypt(OTHER, sealed, owner=OWNER)
    await envelope.encrypt(OTHER, b"x", owner=OWNER)
    with pytest.raises(DecryptionError, match="authenticate"):  # its key 1 is a different key
        await envelope.decrypt(OTHER, sealed, owner=OWNER)
    with pytest.raises(DecryptionError, match="authenticate"):
        await envelope.decrypt(TENANT, sealed, owner="credential:43:secret")


async def test_tampered_byte_fails(envelope: Envelope) -> None:
    sealed = bytearray(await envelope.encrypt(TENANT, b"token", owner=OWNER))
    sealed[-3] ^= 0x40
    with pytest.raises(DecryptionError):
        await envelope.decrypt(TENANT, bytes(sealed), owner=OWNER)


async def test_rotate_tenant_key(envelope: Envelope) -> None:
    old = await envelope.encrypt(TENANT, b"old", owner=OWNER)
    assert await envelope.rotate_tenant_key(TENANT) == 2
    new = await envelope.encrypt(TENANT, b"new", owner=OWNER)
    assert (sealed_key_id(old), sealed_key_id(new)) == (1, 2)
    assert await envelope.decrypt(TENANT, old, owner=OWNER) == b"old"
    assert await envelope.decrypt(TENANT, new, owner=OWNER) == b"new"


async def test_reencrypt_moves_to_active_key(envelope: Envelope) -> None:
    old = await envelope.encrypt(TENANT, b"value", owner=OWNER)
    assert await envelope.reencrypt(TENANT, old, owner=OWNER) == old  # already current
    await envelope.rotate_tenant_key(TENANT)
    moved = await envelope.reencrypt(TENANT, old, owner=OWNER)
    assert sealed_key_id(moved) == 2
    assert await envelope.decrypt(TENANT, moved, owner=OWNER) == b"value"
    with pytest.raises(DecryptionError):
        await envelope.reencrypt(TENANT, moved, owner="someone else")
    with pytest.raises(DecryptionError):
        await envelope.reencrypt(TENANT, moved[:-1] + bytes([moved[-1] ^ 1]), owner=OWNER)


async def test_deployment_key_rotation_through_envelope(keyring: Keyring) -> None:
    store = InMemoryDataKeyStore()
    envelope = Envelope(keyring, store)
    old = await envelope.encrypt(TENANT, b"old", owner=OWNER)
    keyring.add_key()
    await envelope.rotate_tenant_key(TENANT)
    active = await store.get_active(TENANT)
    assert active is not None
    assert (active.key_id, active.wrapped.kek_id) == (2, 2)
    first = await store.get(TENANT, 1)
    assert first is not None
    assert first.wrapped.kek_id == 1
    assert await envelope.decrypt(TENANT, old, owner=OWNER) == b"old"
    # A fresh process loading the rotated file reads both generations.
    reloaded = Envelope(Keyring.load(keyring.path or Path()), store)
    new = await envelope.encrypt(TENANT, b"new", owner=OWNER)
    assert await reloaded.decrypt(TENANT, old, owner=OWNER) == b"old"
    assert await reloaded.decrypt(TENANT, new, owner=OWNER) == b"new"


async def test_deleting_tenant_keys_makes_data_unreadable(envelope: Envelope) -> None:
    mine = await envelope.encrypt(TENANT, b"mine", owner=OWNER)
    await envelope.rotate_tenant_key(TENANT)
    newer = await envelope.encrypt(TENANT, b"newer", owner=OWNER)
    theirs = await envelope.encrypt(OTHER, b"theirs", owner=OWNER)
    await envelope.delete_tenant_keys(TENANT)
    for sealed in (mine, newer):
        with pytest.raises(DataKeyUnavailableError):
            await envelope.decrypt(TENANT, sealed, owner=OWNER)
    assert await envelope.decrypt(OTHER, theirs, owner=OWNER) == b"theirs"
    # Writing again creates a key with a fresh id: old ciphertexts never meet a new key.
    fresh = await envelope.encrypt(TENANT, b"fresh", owner=OWNER)
    assert sealed_key_id(fresh) == 3
    with pytest.raises(DataKeyUnavailableError):
        await envelope.decrypt(TENANT, mine, owner=OWNER)


async def test_unknown_deployment_key_is_unavailable(envelope: Envelope) -> None:
    store = InMemoryDataKeyStore()
    sealed = await Envelope(Keyring.in_memory(), store).encrypt(TENANT, b"x", owner=OWNER)
    with pytest.raises(DataKeyUnavailableError):  # same kek id 1, different deployment key
        await Envelope(Keyring.in_memory(), store).decrypt(TENANT, sealed, owner=OWNER)


async def test_garbage_ciphertext_is_a_decryption_error(envelope: Envelope) -> None:
    for garbage in (b"", b"\x02" + bytes(40), b"\x01" + bytes(10)):
        with pytest.raises(DecryptionError):
            await envelope.decrypt(TENANT, garbage, owner=OWNER)


async def test_an_unwrapped_key_is_kept_for_its_row_and_its_time(
    keyring: Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = InMemoryDataKeyStore()
    envelope = Envelope(keyring, store, unwrapped_ttl_s=600)
    await envelope.encrypt(TENANT, b"x", owner=OWNER)
    stored = await store.get_active(TENANT)
    assert stored is not None
    first = envelope.unwrap(TENANT, stored)
    assert envelope.unwrap(TENANT, stored) is first
    assert envelope.unwrap(str(TENANT), stored) is first
    # The same row re-wrapped under another deployment key is another row: unwrapped anew.
    keyring.add_key()
    rewrapped = StoredDataKey(1, new_data_key(keyring, TENANT))
    assert envelope.unwrap(TENANT, rewrapped) is not first
    # Never for another tenant, whose binding the wrapped key does not open.
    with pytest.raises(DataKeyUnavailableError):
        envelope.unwrap(OTHER, stored)
    later = time.monotonic() + 601
    monkeypatch.setattr(envelope_module, "time", SimpleNamespace(monotonic=lambda: later))
    assert envelope.unwrap(TENANT, stored) is not first


async def test_without_a_time_every_use_unwraps(keyring: Keyring) -> None:
    store = InMemoryDataKeyStore()
    envelope = Envelope(keyring, store)
    await envelope.encrypt(TENANT, b"x", owner=OWNER)
    stored = await store.get_active(TENANT)
    assert stored is not None
    assert envelope.unwrap(TENANT, stored) is not envelope.unwrap(TENANT, stored)
