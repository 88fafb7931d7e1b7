"""``agentbus-gateway serve`` as a real process (granian, migrations, NATS, signing key) answers
``/healthz`` and ``/readyz``, says where it keeps payloads and analytics and where the console is,
and stops on SIGTERM; with a keyring that did not wrap the database's keys it does not start."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psycopg
import pytest
from agentbus.gateway.actions.signing import ensure_signing_key
from agentbus.keys import load_or_create_keyring
from platformkit.testing.services import free_port


async def test_serve_answers_healthz(agentbus_db: str, nats_url: str, tmp_path: Path) -> None:
    port = free_port()
    command = [str(Path(sys.executable).parent / "agentbus-gateway"), "serve", "--port", str(port)]
    env = {
        **os.environ,
        "AGENTBUS_DATABASE_URL": agentbus_db,
        "AGENTBUS_NATS_URL": nats_url,
        "AGENTBUS_CONFIG_DIR": str(tmp_path / "config"),
    }
    log = (tmp_path / "serve.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=2.0) as client:
            for _ in range(300):
                assert process.returncode is None, (tmp_path / "serve.log").read_text()
                try:
                    health = await client.get("/healthz")
                    ready = await client.get("/readyz")
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
                    continue
                if ready.status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert health.status_code == 200
            assert health.json() == {"status": "ok"}
            assert ready.status_code == 200, ready.text
            assert health.headers["x-request-id"]
            assert health.headers["date"]  # sidecars correct their clocks from it
            jwks = (await client.get("/.well-known/jwks.json")).json()
            assert len(jwks["keys"]) == 1  # the first signing key was created at startup
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()
        log.close()
    assert (tmp_path / "config" / "keyring.json").stat().st_mode & 0o077 == 0
    said = (tmp_path / "serve.log").read_text()
    assert f"payloads in {tmp_path / 'config' / 'objects'}\n" in said
    assert f"console: http://127.0.0.1:{port}/console (" in said
    assert f"analytics in chDB at {tmp_path / 'config' / 'analytics'}\n" in said


@pytest.mark.parametrize("keyring", ["another", "none"])
async def test_serve_refuses_a_keyring_that_did_not_wrap_the_databases_keys(
    agentbus_db: str, nats_url: str, tmp_path: Path, keyring: str
) -> None:
    """A database set up with one keyring and a gateway started with another (or with none, as
    after keyring.json was lost) would fail in every worker with a decryption error; serve
    says what is wrong before starting them, and exits 1."""
    async with await psycopg.AsyncConnection.connect(agentbus_db, autocommit=True) as admin:
        await ensure_signing_key(admin, load_or_create_keyring(tmp_path / "first" / "keyring.json"))
    config = tmp_path / "config"
    if keyring == "another":
        load_or_create_keyring(config / "keyring.json")
    env = {**os.environ, "AGENTBUS_DATABASE_URL": agentbus_db, "AGENTBUS_NATS_URL": nats_url,
           "AGENTBUS_CONFIG_DIR": str(config), "COLUMNS": "200"}  # fmt: skip
    command = [str(Path(sys.executable).parent / "agentbus-gateway"), "serve", "--port", "1"]
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    text = " ".join(output.decode().split())
    assert process.returncode == 1, text
    assert "cannot start" in text
    assert ("did not wrap" if keyring == "another" else "there is no keyring") in text
    assert "restore the keyring.json" in text
    assert not (config / "keyring.json").exists() or keyring == "another"  # none was made up


def test_serve_starts_the_embedded_nats_where_the_platformkit_settings_say(
    agentbus_db: str, tmp_path: Path
) -> None:
    """``PLATFORMKIT_NATS_PORT`` and ``PLATFORMKIT_NATS_STORE`` place the embedded NATS, as
    for every system of the repository (``prepare`` in a process of its own, as ``serve``)."""
    from platformkit.nats.embedded import EmbeddedNats

    port, store = free_port(), tmp_path / "nats"
    env = {**os.environ, "AGENTBUS_DATABASE_URL": agentbus_db,
           "AGENTBUS_CONFIG_DIR": str(tmp_path / "config"),
           "PLATFORMKIT_NATS_PORT": str(port), "PLATFORMKIT_NATS_STORE": str(store)}  # fmt: skip
    script = ("from agentbus.gateway.config import GatewaySettings\n"
              "from agentbus.serve import prepare\n"
              "print(prepare(GatewaySettings())[1])\n")  # fmt: skip
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"nats://127.0.0.1:{port}"
        assert (store / "nats-server.pid").exists()
    finally:
        EmbeddedNats(store_dir=store, port=port).stop()
