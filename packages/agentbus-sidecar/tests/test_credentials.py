from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from agentbus_sidecar.actions.setup import init_credentials, login
from agentbus_sidecar.credentials import Credentials, load_credentials, save_credentials
from agentbus_sidecar.errors import ConfigError
from agentbus_sidecar.keys import generate_key, private_key_pem, public_key_b64url

TOKEN = "ab_live_" + "x1" * 20


def _init(path: Path, **overrides: object) -> Credentials:
    args: dict[str, object] = {
        "gateway_url": "https://gw.example",
        "address": "agent://acme/platform/planner",
        "token": None,
        **overrides,
    }
    return init_credentials(path, **args)  # type: ignore[arg-type]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_writes_a_private_file_with_a_new_key(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "agentbus" / "credentials.json"
    creds = _init(
        path,
        gateway_url="https://gw.example/",
        address=" agent://Acme/Platform/Planner ",
        token=TOKEN,
    )
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    assert creds.address == "agent://acme/platform/planner"
    assert creds.gateway_url == "https://gw.example"
    assert creds.private_key.startswith("-----BEGIN PRIVATE KEY-----")
    loaded = load_credentials(path)
    assert public_key_b64url(loaded.signing_key()) == public_key_b64url(creds.signing_key())
    assert loaded.integration_token == TOKEN
    assert [p.name for p in path.parent.iterdir()] == ["credentials.json"]  # no temp files left


def test_secrets_stay_out_of_repr_and_hints(tmp_path: Path) -> None:
    creds = _init(tmp_path / "c.json", token=TOKEN)
    creds.next_private_key = private_key_pem(generate_key())
    text = repr(creds)
    assert TOKEN not in text
    assert "PRIVATE" not in text
    assert creds.token_hint == "ab_live_x1x1x1...x1x1"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o700])
def test_a_file_others_can_access_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "c.json"
    _init(path)
    os.chmod(path, mode)
    if mode & 0o077:
        with pytest.raises(ConfigError, match="chmod 600"):
            load_credentials(path)
    else:
        load_credentials(path)


def test_init_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    first = _init(path)
    with pytest.raises(ConfigError, match="--force"):
        _init(path)
    key = generate_key()
    second = _init(path, key_text=private_key_pem(key), force=True)
    assert second.private_key != first.private_key
    assert public_key_b64url(load_credentials(path).signing_key()) == public_key_b64url(key)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gateway_url": "http://gw.example"}, "https://"),
        ({"gateway_url": "ftp://127.0.0.1"}, "https://"),
        ({"token": "ab_live_short"}, "40 letters"),
        ({"token": "xx_live_" + "a" * 40}, "40 letters"),
        ({"address": "agent://acme/platform/system"}, "reserved"),
        ({"address": "agent://acme/platform"}, "address"),
    ],
)
def test_bad_inputs_are_refused(tmp_path: Path, kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _init(tmp_path / "c.json", **{"gateway_url": "http://127.0.0.1:8080", **kwargs})


def test_login_replaces_the_token_and_keeps_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    creds = _init(path)
    creds.agent_id = "agt_" + "1" * 32
    save_credentials(path, creds)
    updated = login(path, token=TOKEN)
    assert updated.integration_token == TOKEN
    assert updated.private_key == creds.private_key
    assert load_credentials(path).agent_id == creds.agent_id


def test_malformed_files_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"gateway_url": "https://gw.example"}')
    os.chmod(path, 0o600)
    with pytest.raises(ConfigError, match="malformed"):
        load_credentials(path)
    with pytest.raises(ConfigError, match="agentbus init"):
        load_credentials(tmp_path / "missing.json")


def test_a_rotation_in_progress_survives_a_reload(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    creds = _init(path, token=TOKEN)
    creds.key_expires_at, creds.next_private_key = "2027-03-01T00:00:00.000Z", "pending"
    save_credentials(path, creds)
    loaded = load_credentials(path)
    assert (loaded.key_expires_at, loaded.next_private_key) == (creds.key_expires_at, "pending")
