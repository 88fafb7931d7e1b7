"""Configuration: environment and Celery settings, defaults, and errors that hide secrets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from z4j_agent.config import AgentConfig, ConfigError, load_config
from z4j_agent.protocol import encode_secret

SECRET = os.urandom(32)
TOKEN = "z4j_agent_tok_abcdefghijklmnop"


def env(**extra: str) -> dict[str, str]:
    return {
        "Z4J_BRAIN_URL": "http://127.0.0.1:7700",
        "Z4J_TOKEN": TOKEN,
        "Z4J_HMAC_SECRET": encode_secret(SECRET),
    } | extra


def test_defaults() -> None:
    config = load_config(env())
    assert config.brain_url == "http://127.0.0.1:7700"
    assert config.ws_url == "ws://127.0.0.1:7700/ws/agent"
    assert config.http_url("/api/v1/agent/events") == "http://127.0.0.1:7700/api/v1/agent/events"
    assert config.hmac_secret == SECRET
    assert (config.batch_size, config.buffer_max_events, config.transport) == (500, 100_000, "ws")
    assert config.flush_interval == 1.0
    assert TOKEN not in repr(config)
    assert repr(SECRET) not in repr(config)


def test_every_setting_from_the_environment(tmp_path: Path) -> None:
    config = load_config(
        env(
            Z4J_BRAIN_URL="wss://brain.example/z4j/",
            Z4J_BUFFER_PATH=str(tmp_path / "b.db"),
            Z4J_BUFFER_MAX_EVENTS="1000",
            Z4J_BATCH_SIZE="50",
            Z4J_FLUSH_INTERVAL="0.25",
            Z4J_TRANSPORT="HTTP",
            Z4J_REDACT_KEYS="ssn, card_number,",
        )
    )
    assert config.brain_url == "https://brain.example/z4j"
    assert config.ws_url == "wss://brain.example/z4j/ws/agent"
    assert config.buffer_file("worker-x") == tmp_path / "b.db"
    assert (config.buffer_max_events, config.batch_size, config.flush_interval) == (1000, 50, 0.25)
    assert config.transport == "http"
    assert config.redact_keys == ("ssn", "card_number")


def test_celery_settings_and_environment_precedence() -> None:
    conf = {
        "z4j_brain_url": "http://conf:1",
        "z4j_token": TOKEN,
        "z4j_hmac_secret": encode_secret(SECRET),
        "z4j_batch_size": 7,
        "z4j_redact_keys": ["ssn"],
    }
    config = load_config({}, conf)
    assert (config.brain_url, config.batch_size, config.redact_keys) == (
        "http://conf:1",
        7,
        ("ssn",),
    )
    assert load_config({"Z4J_BATCH_SIZE": "9"}, conf).batch_size == 9


def test_buffer_file_in_a_directory_or_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_dir = load_config(env(Z4J_BUFFER_PATH=str(tmp_path) + "/"))
    assert as_dir.buffer_file("worker-celery@host/1") == tmp_path / "worker-celery@host_1.sqlite3"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert load_config(env()).buffer_file("w") == tmp_path / "state" / "z4j-agent" / "w.sqlite3"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"Z4J_BRAIN_URL": ""}, "Z4J_BRAIN_URL is not set"),
        ({"Z4J_BRAIN_URL": "ftp://x"}, "Z4J_BRAIN_URL must be an http"),
        ({"Z4J_BRAIN_URL": "http://"}, "with a host"),
        ({"Z4J_BRAIN_URL": f"http://u:{TOKEN}@h"}, "must not carry credentials"),
        ({"Z4J_TOKEN": ""}, "Z4J_TOKEN is not set"),
        ({"Z4J_TOKEN": f"{TOKEN} {TOKEN}"}, "Z4J_TOKEN is malformed"),
        ({"Z4J_HMAC_SECRET": ""}, "Z4J_HMAC_SECRET is not set"),
        ({"Z4J_HMAC_SECRET": "c2hvcnQ"}, "at least 32 bytes"),
        ({"Z4J_HMAC_SECRET": "not base64 at all!"}, "urlsafe-base64"),
        ({"Z4J_BATCH_SIZE": "0"}, "Z4J_BATCH_SIZE must be an integer between 1 and 5000"),
        ({"Z4J_BATCH_SIZE": "9999"}, "between 1 and 5000"),
        ({"Z4J_BUFFER_MAX_EVENTS": "lots"}, "Z4J_BUFFER_MAX_EVENTS must be an integer"),
        ({"Z4J_FLUSH_INTERVAL": "-1"}, "Z4J_FLUSH_INTERVAL must be a number"),
        ({"Z4J_TRANSPORT": "carrier-pigeon"}, "Z4J_TRANSPORT must be 'ws' or 'http'"),
    ],
)
def test_errors_name_the_setting_and_hide_secrets(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_config(env(**changes))
    assert TOKEN not in str(err.value)
    assert encode_secret(SECRET) not in str(err.value)


def test_config_can_be_built_directly() -> None:
    config = AgentConfig(brain_url="https://b", token=TOKEN, hmac_secret=SECRET)
    assert config.ws_url == "wss://b/ws/agent"
