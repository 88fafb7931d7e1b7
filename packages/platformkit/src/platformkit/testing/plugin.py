"""The pytest plugin: session-wide real services and per-test databases.

At the start of a session it removes the systems' settings from the environment (``SETTINGS``:
``AGENTBUS_*``, ``Z4J_*``, ``STRATAPLANE_*`` and ``PLATFORMKIT_*``, but ``PLATFORMKIT_TEST_*``,
which configure the tests): a developer's shell may export a deployment's database URL or a
setting such as ``AGENTBUS_INLINE_PAYLOADS``, and the tests and the servers they start would
otherwise read it, pointing them at that deployment or changing what they test.

Fixtures:
- ``pg_admin_url``: superuser URL of one embedded PostgreSQL per test session (or of the server
  in PLATFORMKIT_TEST_DATABASE_URL).
- ``database_factory``: creates migrated templates once and fresh databases from them.
- ``fresh_database``: an empty database for one test, dropped afterwards.
- ``nats_url``: one embedded NATS JetStream server per test session.
- ``chromium`` / ``page``: Debian's Chromium driven by Playwright.

Order: a test module that takes minutes (real workers, browsers, end-to-end runs) says so with
``pytestmark = pytest.mark.long_module``, and such modules run first. Two processes take a
module at a time (``--dist loadfile``), so a long module started last would keep one of them
busy while the other has nothing left to do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from platformkit.db.embedded import EmbeddedPostgres
from platformkit.nats.embedded import EmbeddedNats
from platformkit.testing.databases import DatabaseFactory
from platformkit.testing.services import free_port, service_missing

SETTINGS = ("AGENTBUS_", "Z4J_", "STRATAPLANE_", "PLATFORMKIT_")
TEST_SETTINGS = "PLATFORMKIT_TEST_"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "long_module: a module that takes minutes; such modules are run first"
    )
    for name in [n for n in os.environ if n.startswith(SETTINGS)]:
        if not name.startswith(TEST_SETTINGS):
            del os.environ[name]
    _property_test_settings()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long modules first, each module's tests in their own order (a stable sort)."""
    items.sort(key=lambda item: item.get_closest_marker("long_module") is None)


def _property_test_settings() -> None:
    """Property tests judge what a rule answers, never how fast: hypothesis's default deadline
    of 200 ms per example fails them on a busy machine. Under CI the examples are derived from
    each test's name, so a run is repeatable; elsewhere they are random, to keep exploring."""
    from hypothesis import settings  # a test dependency, as pytest is

    settings.register_profile("platformkit", deadline=None, derandomize=bool(os.environ.get("CI")))
    settings.load_profile("platformkit")


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    external = os.environ.get("PLATFORMKIT_TEST_DATABASE_URL")
    if external:
        yield external
        return
    yield from _embedded(
        "embedded PostgreSQL",
        "pk-pg-",
        lambda root: EmbeddedPostgres(data_dir=root / "data", port=free_port(), fast=True),
    )


def _embedded(
    what: str, prefix: str, make: Callable[[Path], EmbeddedPostgres | EmbeddedNats]
) -> Iterator[str]:
    """Start ``make(root)`` in a fresh temporary ``root`` and yield its URL; stop it and remove
    the root afterwards. A server that cannot start skips the tests that need it (fails them
    under CI)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    server = make(root)
    try:
        url = server.start()
    except Exception as exc:
        service_missing(what, str(exc))
    try:
        yield url
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def database_factory(pg_admin_url: str) -> DatabaseFactory:
    return DatabaseFactory(pg_admin_url)


@pytest.fixture
def fresh_database(database_factory: DatabaseFactory) -> Iterator[str]:
    url = database_factory.create()
    yield url
    database_factory.drop(url)


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    yield from _embedded(
        "embedded NATS", "pk-nats-", lambda root: EmbeddedNats(store_dir=root, port=free_port())
    )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """moto's S3 server for the session (``platformkit.testing.s3.S3Server``)."""
    from platformkit.testing.s3 import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    if not os.path.exists(CHROMIUM):
        service_missing("Chromium", f"{CHROMIUM} not found (Debian package 'chromium')")
    return CHROMIUM


@pytest.fixture(scope="session")
async def chromium(chromium_executable: str) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_executable, args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


@pytest.fixture
async def page(chromium: Any) -> AsyncIterator[Any]:
    context = await chromium.new_context()
    pg = await context.new_page()
    yield pg
    await context.close()
