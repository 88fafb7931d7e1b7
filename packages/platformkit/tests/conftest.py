"""Shared fixtures for platformkit's own tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from platformkit.db.migrator import Migrator, load_directory
from platformkit.db.roles import RoleSpec

MIGRATIONS = Path(__file__).parent / "db_migrations"


def make_migrator(directory: Path = MIGRATIONS) -> Migrator:
    return Migrator(
        system="kit",
        sources=[load_directory("kit", directory)],
        roles=RoleSpec(owner="kit_owner", app="kit_app"),
    )


@pytest.fixture
def kit_migrator() -> Migrator:
    """Migrates the kernel's test schema: a forced-RLS ``notes`` table."""
    return make_migrator()


@pytest.fixture
def make_kit_migrator() -> Callable[[Path], Migrator]:
    """Builds a migrator over another directory (a copy a test may edit)."""
    return make_migrator
