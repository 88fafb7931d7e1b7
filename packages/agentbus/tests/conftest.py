"""Fixtures shared by this folder's end-to-end tests (``agentbus.e2e``)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentbus.e2e import Stack, World, open_pair, open_stack, open_world
from agentbus.testing import agentbus_template
from platformkit.testing.databases import DatabaseFactory

_pairs = itertools.count(1)


@pytest.fixture
async def sidecars(agentbus_db: str, tmp_path: Path) -> AsyncIterator[World]:
    """A gateway process and NATS of the test's own, and the sidecars of alice and bob: for
    tests that stop, kill or reconfigure the stack."""
    async with open_world(agentbus_db, tmp_path) as opened:
        yield opened


@pytest.fixture(scope="module")
async def shared_stack(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Stack, str]]:
    """One gateway process, NATS and database for a module's tests, with the bootstrap token."""
    url = database_factory.create(await agentbus_template(database_factory), stem="agentbus")
    try:
        async with open_stack(url, tmp_path_factory.mktemp("stack")) as opened:
            yield opened
    finally:
        database_factory.drop(url)


@pytest.fixture
async def pair(shared_stack: tuple[Stack, str], tmp_path: Path) -> AsyncIterator[World]:
    """Agents of the test's own (``alice-N``, ``bob-N``) on the module's shared stack."""
    stack, token = shared_stack
    async with open_pair(stack, token, tmp_path, f"-{next(_pairs)}") as opened:
        yield opened
