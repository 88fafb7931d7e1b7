"""Platform scope (strataplane.scope = 'platform') is opened only by the code paths the schema
lists (docs/strataplane/architecture.md §5.6). A new caller fails this test until it is added
here with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import strataplane

ROOT = Path(strataplane.__file__).parent
ALLOWED = {
    "actions.access:platform_tx": "the gate of platform actions: tenant and user administration",
    "actions.tokens:authenticate_token": "credential lookup by hash, before the tenant is known",
    "actions.sessions:choices_of": "the tenants a user can choose at login",
    "actions.sessions:bind": "sessions bound to the platform, or to no tenant yet",
    "actions.oidc:complete_login": "single sign-on: a new user in the platform audit chain",
    "actions.sessions:_failed": "failed logins and locks, in the platform audit chain",
    "actions.invitations:received_invitations": "a user's own invitations, across tenants",
    "actions.invitations:answer_invitation": "the tenant of a user's own invitation",
    "actions.jobs:run_tenant_deletion": "tenant deletion",
    "actions.admin:verify_chains": "administration from the command line (audit verify)",
    "agents.auth:_fetch": "agent credential lookups by hash, before the tenant is known",
    "agents.telegraf_class:identify": "class token lookups by hash, before the tenant is known",
    "actions.fleet_enrollment:enroll_agent": "enrollment token lookup by hash: it names the tenant",
    "controllers.fleet_loop:_gain": "controller shard scheduling (controller_shard row)",
    "controllers.fleet_loop:_body": "controller shard scheduling (the tenants of a shard)",
    "controllers.audit_sinks:run_once": "the sinks to export; each one in its tenant's scope",
    "controllers.audit_bucket:run_once": "the tenants to ship to a bucket; each in its own scope",
    "actions.keyring_ops:_tenants_with_keys": "keyring rotation: the tenants to re-key, one by one",
    "actions.keyring_ops:keyring_status": "keyring status: data keys per deployment key",
}
PLATFORM_ACTION_MODULES = {
    "actions.tenants",
    "actions.tenant_admins",
    "actions.users",
    "actions.tokens",
    "actions.catalog",  # the installation-wide plugin catalog
}


def _callers(name: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                callee = node.func if isinstance(node, ast.Call) else None
                called = getattr(callee, "id", None) or getattr(callee, "attr", None)
                if called == name:
                    found.setdefault(module, set()).add(func.name)
    return found


def test_platform_transactions_are_opened_only_where_allowed() -> None:
    callers = {f"{m}:{f}" for m, funcs in _callers("platform_transaction").items() for f in funcs}
    assert callers <= set(ALLOWED), f"new platform scope callers: {callers - set(ALLOWED)}"


def test_platform_actions_live_in_platform_modules() -> None:
    assert set(_callers("platform_tx")) <= PLATFORM_ACTION_MODULES
