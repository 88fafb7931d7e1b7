"""strataplane's database: where it is, how it is migrated, and the scope of its transactions.

Migrations run as ``strataplane_owner``; the server logs in as ``strataplane_app``, which is
neither superuser nor BYPASSRLS. Every table with a tenant_id FORCEs row-level security, so the
policy holds for the owner too (docs/strataplane/architecture.md §5.7).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from platformkit.db.migrator import Migrator, load_directory
from platformkit.db.pool import with_user
from platformkit.db.roles import RoleSpec
from platformkit.db.scope import ScopeSettings
from platformkit.db.server import admin_url_for
from platformkit.jobs import absurd_source

DATABASE = "strataplane"
SCHEMA = "strataplane"
OWNER_ROLE = "strataplane_owner"
APP_ROLE = "strataplane_app"
QUEUE = "strataplane"
SCOPE = ScopeSettings(tenant="strataplane.tenant", platform="strataplane.scope")


def migrator(
    app_password: str | None = None, on_progress: Callable[[str], None] | None = None
) -> Migrator:
    """absurd's schema first (the queue migration needs it), then strataplane's files."""
    source = load_directory("strataplane", files("strataplane") / "migrations")
    roles = RoleSpec(owner=OWNER_ROLE, app=APP_ROLE, app_password=app_password)
    return Migrator(
        system="strataplane",
        sources=[absurd_source(), source],
        roles=roles,
        on_progress=on_progress or (lambda _label: None),
    )


def resolve_admin_url(configured: str | None, say: Callable[[str], None] | None = None) -> str:
    """The configured server, or the embedded one with database ``strataplane`` created."""
    return admin_url_for(configured, DATABASE, say)


def with_search_path(url: str) -> str:
    """``url`` whose sessions resolve unqualified names in schema ``strataplane`` first."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} -c search_path={SCHEMA}".strip()
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def app_url(admin_url: str, app_password: str | None = None) -> str:
    """The application's login: the non-superuser role, on the same server and database."""
    return with_search_path(with_user(admin_url, APP_ROLE, app_password))
