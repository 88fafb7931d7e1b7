"""The brain's database: where it is, how it is migrated, and the scopes of its transactions."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files

from platformkit.db.migrator import Migrator, load_directory
from platformkit.db.pool import with_user
from platformkit.db.roles import RoleSpec
from platformkit.db.scope import ScopeSettings
from platformkit.db.server import admin_url_for

from z4j.secrets_file import BrainSecrets

DATABASE = "z4j"
OWNER_ROLE = "z4j_owner"
APP_ROLE = "z4j_app"
SCOPE = ScopeSettings(tenant="z4j.project", platform="z4j.scope")


def _app_password(secrets: BrainSecrets) -> str:
    return secrets.derive("database-app-password").hex()


def migrator(secrets: BrainSecrets, on_progress: Callable[[str], None] | None = None) -> Migrator:
    """Migrations run as z4j_owner; the login role z4j_app gets a password derived from the
    brain's secrets, so an external server with password authentication works unchanged."""
    source = load_directory("z4j", files("z4j") / "migrations")
    roles = RoleSpec(owner=OWNER_ROLE, app=APP_ROLE, app_password=_app_password(secrets))
    return Migrator(
        system="z4j",
        sources=[source],
        roles=roles,
        on_progress=on_progress or (lambda _label: None),
    )


def resolve_admin_url(configured: str | None, say: Callable[[str], None] | None = None) -> str:
    return admin_url_for(configured, DATABASE, say)


def app_url(admin_url: str, secrets: BrainSecrets) -> str:
    """The application logs in as the non-superuser role, never as the administrator."""
    return with_user(admin_url, APP_ROLE, _app_password(secrets))
