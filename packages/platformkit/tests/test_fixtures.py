"""The test fixtures themselves: a real NATS JetStream server and a real Chromium page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nats
import pytest
from platformkit.testing.services import service_missing


async def test_nats_fixture_is_jetstream(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="fixture", subjects=["fixture.>"])
        ack = await js.publish("fixture.one", b"hello", headers={"Nats-Msg-Id": "m1"})
        dup = await js.publish("fixture.one", b"hello", headers={"Nats-Msg-Id": "m1"})
        assert ack.seq == 1
        assert dup.duplicate
        sub = await js.pull_subscribe("fixture.>", durable="reader")
        (msg,) = await sub.fetch(1, timeout=5)
        assert msg.data == b"hello"
        await msg.ack()
    finally:
        await nc.close()


async def test_page_fixture_renders(page: Any, tmp_path: Path) -> None:
    await page.set_content("<main><h1 id='t'>platformkit</h1></main>")
    assert await page.inner_text("#t") == "platformkit"
    shot = tmp_path / "page.png"
    await page.screenshot(path=str(shot))
    assert shot.stat().st_size > 0


def test_missing_service_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="redis is not available"):
        service_missing("redis", "nothing listens on 6379")


def test_missing_service_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="redis is not available"):
        service_missing("redis", "nothing listens on 6379")
