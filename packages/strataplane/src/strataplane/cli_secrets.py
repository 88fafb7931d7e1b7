"""``strataplane secrets ...``: Secret values over the HTTP API (logged in as for ``cs``), and
the deployment keyring with the database URL (``export-key``, ``restore-key``,
``rotate-keyring``, ``keyring-status``), as an operator on the server's host.

A value is read from standard input (or typed without echo at a terminal), never from the
command line, where shells and process lists keep it.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from wirekit.clierrors import CliError

from strataplane.cli_spec import client, e, out

secrets_app = typer.Typer(
    help="Secret values (never shown back) and the deployment keyring.", no_args_is_help=True
)
Name = Annotated[str, typer.Argument(help="The Secret's name (secrets/NAME.toml).")]
Version = Annotated[int, typer.Argument(help="A version number.", min=1, max=2**31 - 1)]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        help="Administrative URL (default: the embedded server).", envvar="STRATAPLANE_DATABASE_URL"
    ),
]


def _read_value() -> str:
    if sys.stdin.isatty():
        value: str = typer.prompt("value", hide_input=True, confirmation_prompt=True)
        return value
    raw = sys.stdin.read()
    return raw[:-1] if raw.endswith("\n") else raw  # `echo` adds one newline


def _write(ctx: typer.Context, name: str, comment: str | None, *, rotate: bool) -> None:
    body: dict[str, Any] = {"value": _read_value(), "rotate": rotate}
    if comment is not None:
        body["comment"] = comment
    made = client(ctx).call("POST", f"/secrets/{name}/versions", body=body).json()
    out.print(f"[green]{e(name)}[/] version {made['version']} is current")


@secrets_app.command("set")
def secrets_set(
    ctx: typer.Context,
    name: Name,
    comment: Annotated[str | None, typer.Option(help="Why, for the history.")] = None,
) -> None:
    """Write a new version of NAME from standard input (the first one included)."""
    _write(ctx, name, comment, rotate=False)


@secrets_app.command("rotate")
def secrets_rotate(
    ctx: typer.Context,
    name: Name,
    comment: Annotated[str | None, typer.Option(help="Why, for the history.")] = None,
) -> None:
    """Write a new version of NAME, refused unless it has one already; agents reload."""
    _write(ctx, name, comment, rotate=True)


@secrets_app.command("list")
def secrets_list(ctx: typer.Context) -> None:
    """Every Secret of the latest revision and every name with versions."""
    table = Table("name", "in spec", "owner", "min assurance", "current", "versions")
    for s in client(ctx).get("/secrets"):
        table.add_row(
            e(s["name"]),
            "yes" if s["in_spec"] else "no",
            e(s["owner"] or "-"),
            e(s["min_assurance"] or "-"),
            f"v{s['current_version']}" if s["current_version"] else "none",
            str(s["versions"]),
        )
    out.print(table)


@secrets_app.command("show")
def secrets_show(ctx: typer.Context, name: Name) -> None:
    """NAME's versions (metadata only)."""
    s = client(ctx).get(f"/secrets/{name}")
    out.print(f"[bold]{e(s['name'])}[/] current v{s['current_version'] or '-'}")
    table = Table("version", "created", "by", "disabled", "comment")
    for v in s["history"]:
        table.add_row(
            str(v["version"]),
            e(v["created_at"]),
            e(v["created_by"] or "-"),
            e(v["disabled_at"] or ""),
            e(v["comment"] or ""),
        )
    out.print(table)


@secrets_app.command("disable")
def secrets_disable(ctx: typer.Context, name: Name, version: Version) -> None:
    """Disable a version: the newest enabled one becomes current; agents reload."""
    client(ctx).call("POST", f"/secrets/{name}/versions/{version}/disable")
    out.print(f"{e(name)} v{version} disabled")


@secrets_app.command("enable")
def secrets_enable(ctx: typer.Context, name: Name, version: Version) -> None:
    """Enable a disabled version again."""
    client(ctx).call("POST", f"/secrets/{name}/versions/{version}/enable")
    out.print(f"{e(name)} v{version} enabled")


@secrets_app.command("delete")
def secrets_delete(
    ctx: typer.Context,
    name: Name,
    version: Annotated[
        int | None, typer.Option(help="Only this (disabled) version.", min=1, max=2**31 - 1)
    ] = None,
) -> None:
    """Delete a disabled version, or every version of a Secret the spec no longer has."""
    path = f"/secrets/{name}" + (f"/versions/{version}" if version is not None else "")
    client(ctx).call("DELETE", path)
    out.print(f"{e(name)}: deleted" + (f" v{version}" if version is not None else ""))


@secrets_app.command("deliveries")
def secrets_deliveries(ctx: typer.Context, name: Name) -> None:
    """The latest deliveries of NAME to agents."""
    table = Table("when", "version", "agent", "channel", "assurance", "identity")
    for d in client(ctx).get(f"/secrets/{name}/deliveries"):
        table.add_row(
            e(d["ts"]),
            str(d["version"]),
            e(d["agent_instance_id"]),
            e(d["channel"]),
            e(d["assurance"]),
            e(d["identity_subject"] or "-"),
        )
    out.print(table)


def _admin_url(database_url: str | None) -> str:
    from strataplane import db

    return db.resolve_admin_url(database_url)


@secrets_app.command("export-key")
def export_key(
    output: Annotated[Path, typer.Option(help="Backup file to create (mode 0600).")],
    database_url: DatabaseUrl = None,
) -> None:
    """Copy the deployment keyring to a backup file and record the export (secret_key)."""
    from strataplane.actions.keyring_ops import export_keyring

    try:
        ids = asyncio.run(export_keyring(_admin_url(database_url), output))
    except FileExistsError:
        raise CliError("keyring.exists", f"{output} exists; choose a new file") from None
    out.print(f"exported keys {', '.join(map(str, ids))} to {e(output)}; keep it offline")


@secrets_app.command("restore-key")
def restore_key(
    backup: Annotated[Path, typer.Option("--from", help="A file made by export-key.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Install a keyring backup where the server reads its keyring.

    The backup must hold every key this database recorded: a wrong file is refused and
    nothing is replaced."""
    from strataplane.actions.keyring_ops import restore_keyring

    path = asyncio.run(restore_keyring(_admin_url(database_url), backup))
    out.print(f"[green]restored[/] the keyring to {e(path)}")


@secrets_app.command("rotate-keyring")
def rotate_keyring(database_url: DatabaseUrl = None) -> None:
    """Add a deployment key and re-encrypt every tenant's values under it.

    Every tenant gets a new data key wrapped under the new key and its sealed values are
    re-encrypted; older keys then only decrypt. Export the keyring again afterwards."""
    from strataplane.actions.keyring_ops import rotate_keyring as rotate

    done = asyncio.run(rotate(_admin_url(database_url), lambda line: out.print(e(line))))
    out.print(
        f"[green]key {done.key_id}[/] active; {done.tenants} tenants, {done.values} values "
        "re-encrypted; run export-key again"
    )


@secrets_app.command("keyring-status")
def keyring_status(database_url: DatabaseUrl = None) -> None:
    """The keys the database knows: fingerprint, export, retirement, data keys they wrap."""
    from strataplane.actions.keyring_ops import keyring_status as status

    table = Table("key", "fingerprint", "created", "exported", "retired", "tenant keys")
    for row in asyncio.run(status(_admin_url(database_url))):
        table.add_row(
            str(row["id"]),
            row["fingerprint"],
            e(row["created_at"]),
            e(row["exported_at"] or "never"),
            e(row["retired_at"] or ""),
            str(row["tenant_keys"]),
        )
    out.print(table)


anchors_app = typer.Typer(help="Trust anchors: CAs for agents' client certificates.")


@anchors_app.command("add")
def anchors_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A name for the CA.")],
    ca: Annotated[Path, typer.Option(help="The CA certificate (PEM file).")],
    host_mapping: Annotated[
        str, typer.Option(help="san-dns, cn or san-uri-spiffe: where the host name is.")
    ] = "san-dns",
    crl_url: Annotated[
        str | None,
        typer.Option(
            help="The CA's CRL distribution point (http or https); listed serials "
            "never get assurance high."
        ),
    ] = None,
) -> None:
    """Accept client certificates this CA issued (their agents get assurance high)."""
    body = {"name": name, "ca_pem": ca.read_text(encoding="utf-8"), "host_mapping": host_mapping}
    if crl_url is not None:
        body["crl_url"] = crl_url
    made = client(ctx).call("POST", "/trust-anchors", body=body).json()
    out.print(f"[green]trust anchor[/] {e(made['name'])} ({e(made['id'])})")


@anchors_app.command("list")
def anchors_list(ctx: typer.Context) -> None:
    """The tenant's trust anchors."""
    table = Table("name", "id", "host mapping", "added")
    for a in client(ctx).get("/trust-anchors"):
        table.add_row(e(a["name"]), e(a["id"]), e(a["host_mapping"]), e(a["created_at"]))
    out.print(table)


@anchors_app.command("revoke")
def anchors_revoke(
    ctx: typer.Context, anchor_id: Annotated[str, typer.Argument(help="The anchor's id.")]
) -> None:
    """Delete an anchor; the agents it identified drop to assurance low."""
    done = client(ctx).call("DELETE", f"/trust-anchors/{anchor_id}").json()
    out.print(f"revoked; {done['agents_unbound']} agent(s) unbound")


def register(app: typer.Typer) -> None:
    app.add_typer(secrets_app, name="secrets")
    app.add_typer(anchors_app, name="trust-anchors")
