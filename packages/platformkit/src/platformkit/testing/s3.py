"""An S3 endpoint for tests: moto's S3 server in a process of its own (moto is a development
dependency), and the AWS variables that point obstore and boto3 at it."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from platformkit.testing.services import free_port, tcp_reachable

__all__ = ["S3Server", "aim"]


class S3Server:
    """moto's S3 server on ``port`` in a process of its own, started and stopped by the test."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = root / f"s3-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, within_s: float = 30.0) -> str:
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        deadline = time.monotonic() + within_s
        while not tcp_reachable("127.0.0.1", self.port, 0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the S3 server did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        return self.endpoint

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def bucket(self, monkeypatch: pytest.MonkeyPatch) -> str:
        """A fresh bucket, with the AWS variables pointing at this server (obstore reads them);
        ``s3://<bucket>/payloads``."""
        name = f"agentbus-{uuid.uuid4().hex[:16]}"
        aim(monkeypatch, self.endpoint)
        self.make_bucket(name)
        return f"s3://{name}/payloads"

    def make_bucket(self, name: str) -> None:
        httpx.put(f"{self.endpoint}/{name}").raise_for_status()


def aim(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """Point the AWS variables at ``endpoint`` (a plain-HTTP S3 endpoint, any credentials)."""
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "agentbus-test", "AWS_SECRET_ACCESS_KEY": "agentbus-test",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
