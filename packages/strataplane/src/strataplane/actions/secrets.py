"""Secret values: write a new version, list and show metadata, disable or enable a version,
delete versions, read the deliveries (spec-format.md §3.4, docs/strataplane/secrets.md).

The Secret object at the latest revision governs its values: a version is written only while
the object exists there, by a holder of ``secret.write`` on its owner. A new version becomes the
current one; the agents whose configuration refers to the name are told to reload (their
Last-Modified moves), so the value reaches them without a spec change. No answer, error or
audit event carries a value.
"""

from __future__ import annotations

import logging
import re
import weakref
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from platformkit.crypto import Keyring
from platformkit.db.scope import Conn, Pool
from platformkit.ids import uuid7

from strataplane import authz
from strataplane.actions import secret_box
from strataplane.actions import secret_errors as se
from strataplane.actions.access import TenantTx, tenant_tx
from strataplane.actions.context import Ctx, Services
from strataplane.domain.secret_grants import SecretPolicy, policy_of
from strataplane.domain.spec.canonical import parse
from strataplane.domain.spec.diagnostics import SpecError
from strataplane.store import fleet_elastic, fleet_notify, objects, revisions, sealed, secrets
from strataplane.store.secrets import Delivery, SecretVersion

log = logging.getLogger(__name__)
NAME = re.compile(r"[A-Za-z0-9_]{1,128}")
MAX_VALUE = 64 * 1024
MAX_COMMENT = 500


@dataclass(frozen=True)
class SecretInfo:
    name: str
    in_spec: bool
    owner: str | None
    min_assurance: str | None
    current_version: int | None
    versions: int
    updated_at: datetime | None


def owner_of(name: str, version: int) -> str:
    """sealed_value.owner of a Secret version: the value opens only for that version's row."""
    return f"secret/{name}/{version}"


def check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise se.InvalidSecretName("1 to 128 characters: A-Z, a-z, 0-9 and '_'", field="name")


def check_value(value: str) -> bytes:
    if not value:
        raise se.InvalidSecretValue("the value is empty", field="value")
    if "\x00" in value:
        raise se.InvalidSecretValue("the value contains a NUL character", field="value")
    try:
        raw = value.encode()
    except UnicodeEncodeError:
        raise se.InvalidSecretValue("the value is not valid UTF-8 text", field="value") from None
    if len(raw) > MAX_VALUE:
        raise se.InvalidSecretValue(f"at most {MAX_VALUE} bytes", field="value")
    return raw


def check_comment(comment: str | None) -> None:
    if comment is not None and ("\x00" in comment or len(comment) > MAX_COMMENT):
        raise se.InvalidSecretValue(
            f"a comment is at most {MAX_COMMENT} characters, without NUL", field="comment"
        )


async def keyring(services: Services) -> Keyring:
    """The keyring, its fingerprints checked against secret_key once per process and pool."""
    ring = secret_box.load_keyring(services.settings)
    synced = _synced.setdefault(services.pool, set())
    if ring.active_id not in synced:
        unexported = await secret_box.sync_keyring(services.pool, ring)
        if unexported:
            log.warning(
                "keyring keys %s were never exported; back them up with: "
                "strataplane secrets export-key --output FILE",
                unexported,
            )
        synced.add(ring.active_id)
    return ring


# Keyed by the pool object itself: an id() would be reused by a later pool (another
# database), which would then skip recording the keyring there.
_synced: weakref.WeakKeyDictionary[Pool, set[int]] = weakref.WeakKeyDictionary()


async def policies_at_latest(conn: Conn, tenant_id: UUID) -> dict[str, SecretPolicy]:
    """Every Secret object of the latest revision, by name."""
    latest = await revisions.latest_id(conn, tenant_id)
    files = await objects.contents_at(conn, tenant_id, latest, kinds=["Secret"])
    found = {}
    for path, content in files.items():
        name = path.removeprefix("secrets/").removesuffix(".toml")
        try:
            found[name] = policy_of(name, parse(content))
        except SpecError:
            continue
    return found


async def _policy(tx: TenantTx, name: str) -> SecretPolicy | None:
    latest = await revisions.latest_id(tx.conn, tx.tenant_id)
    found = await objects.file_at(tx.conn, tx.tenant_id, f"secrets/{name}.toml", latest)
    if found is None:
        return None
    try:
        return policy_of(name, parse(found[1]))
    except SpecError:
        return None


async def _require_owner(tx: TenantTx, permission: str, policy: SecretPolicy | None) -> None:
    """``permission`` on the Secret's owner team (a tenant-wide binding also covers it)."""
    owner = None
    if policy is not None and policy.owner is not None:
        owner = await secrets.team_id(tx.conn, tx.tenant_id, policy.owner)
    tx.require(permission, authz.Target(secret_owner=owner))


async def _known(tx: TenantTx, name: str) -> tuple[SecretPolicy | None, list[SecretVersion]]:
    """The Secret's policy and versions; 404 when the name has neither."""
    check_name(name)
    policy = await _policy(tx, name)
    versions = await secrets.versions(tx.conn, tx.tenant_id, name)
    if policy is None and not versions:
        raise se.SecretNotFound()
    return policy, versions


async def _reload_referencing(conn: Conn, tenant_id: UUID, name: str) -> int:
    """Telegraf and Vector see a new Last-Modified and fetch again; an Elastic Agent is sent
    its policy again in a new POLICY_CHANGE (the values are put in at delivery), and its held
    check-in is woken for it."""
    agents = await secrets.agents_referencing(conn, tenant_id, name)
    if agents:
        await secrets.touch_desired_since(conn, tenant_id, agents)
        for agent_id in await fleet_elastic.resend_policies(conn, tenant_id, agents):
            await fleet_notify.agent_changed(conn, tenant_id, agent_id)
        await fleet_notify.tenant_changed(conn, tenant_id)
    return len(agents)


async def set_secret(
    ctx: Ctx, name: str, value: str, *, comment: str | None = None, rotate: bool = False
) -> SecretVersion:
    """Write a new version; ``rotate`` requires an earlier one (a typo never starts a name)."""
    check_name(name)
    plaintext = check_value(value)
    check_comment(comment)
    ring = await keyring(ctx.services)
    async with tenant_tx(ctx) as tx:
        policy = await _policy(tx, name)
        if policy is None:
            await _require_owner(tx, "secret.write", None)
            raise se.SecretNotFound(
                f"no secrets/{name}.toml at the latest revision; add it with a change set first"
            )
        await _require_owner(tx, "secret.write", policy)
        version = await secrets.next_version(tx.conn, tx.tenant_id, name)
        if rotate and version == 1:
            raise se.SecretHasNoValue(f"set a first value: strataplane secrets set {name}")
        value_id = uuid7()
        await secret_box.seal_value(
            ring, tx.conn, tx.tenant_id, value_id, owner_of(name, version), plaintext
        )
        row = await secrets.insert_version(
            tx.conn, tx.tenant_id, name, version, value_id, comment, ctx.user_id
        )
        reloading = await _reload_referencing(tx.conn, tx.tenant_id, name)
        details = {"name": name, "version": version, "agents_reloading": reloading}
        await tx.audit("secret.write", "secret", name, details)
    return row


async def list_secrets(ctx: Ctx) -> list[SecretInfo]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        policies = await policies_at_latest(tx.conn, tx.tenant_id)
        counts = await secrets.version_counts(tx.conn, tx.tenant_id)
        current = await secrets.current_versions(tx.conn, tx.tenant_id)
    found = []
    for name in sorted(set(policies) | set(counts)):
        policy, now = policies.get(name), current.get(name)
        found.append(
            SecretInfo(
                name,
                policy is not None,
                policy.owner if policy else None,
                policy.min_assurance if policy else None,
                now.version if now else None,
                counts.get(name, 0),
                now.created_at if now else None,
            )
        )
    return found


async def access_secret(ctx: Ctx, name: str) -> tuple[SecretInfo, list[SecretVersion]]:
    async with tenant_tx(ctx) as tx:
        tx.require("spec.read")
        policy, versions = await _known(tx, name)
    current = next((v for v in versions if v.disabled_at is None), None)
    info = SecretInfo(
        name,
        policy is not None,
        policy.owner if policy else None,
        policy.min_assurance if policy else None,
        current.version if current else None,
        len(versions),
        current.created_at if current else None,
    )
    return info, versions


async def set_version_disabled(ctx: Ctx, name: str, version: int, *, disabled: bool) -> None:
    """Disable a version (the newest enabled one becomes current) or enable it again."""
    async with tenant_tx(ctx) as tx:
        policy, _versions = await _known(tx, name)
        await _require_owner(tx, "secret.write", policy)
        row = await secrets.set_disabled(tx.conn, tx.tenant_id, name, version, disabled=disabled)
        if row is None:
            raise se.SecretVersionNotFound()
        await _reload_referencing(tx.conn, tx.tenant_id, name)
        action = "secret.disable" if disabled else "secret.enable"
        await tx.audit(action, "secret", name, {"name": name, "version": version})


async def delete_secret(ctx: Ctx, name: str, version: int | None = None) -> int:
    """Delete one disabled version, or every version of a name the spec no longer has; the
    sealed values go in the same transaction. Returns how many versions were deleted."""
    async with tenant_tx(ctx) as tx:
        policy, versions = await _known(tx, name)
        await _require_owner(tx, "secret.write", policy)
        if version is None and policy is not None:
            raise se.SecretInSpec(
                f"remove secrets/{name}.toml from the spec first, or delete one disabled version"
            )
        if version is not None:
            match = [v for v in versions if v.version == version]
            if not match:
                raise se.SecretVersionNotFound()
            if match[0].disabled_at is None:
                raise se.SecretVersionEnabled(
                    f"strataplane secrets disable {name} {version}, then delete it"
                )
        value_ids = await secrets.delete_versions(tx.conn, tx.tenant_id, name, version)
        await sealed.delete_sealed(tx.conn, tx.tenant_id, value_ids)
        details = {"name": name, "version": version, "deleted": len(value_ids)}
        await tx.audit("secret.delete", "secret", name, details)
    return len(value_ids)


async def list_deliveries(
    ctx: Ctx, name: str, *, before: int | None = None, limit: int = 100
) -> list[Delivery]:
    async with tenant_tx(ctx) as tx:
        policy, _versions = await _known(tx, name)
        await _require_owner(tx, "secret.delivery.read", policy)
        return await secrets.deliveries(tx.conn, tx.tenant_id, name, before=before, limit=limit)
