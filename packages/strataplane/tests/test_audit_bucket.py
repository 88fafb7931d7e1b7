"""The audit chains shipped to an S3 bucket (moto's S3 server on loopback), at least once and in
order, with the bucket as the only cursor: object names, a restart that goes on where the
bucket says, a store that is away (nothing lost, the backlog shown), and the CLI."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from uuid import UUID

import obstore
import pytest
from hypothesis import given
from hypothesis import strategies as st
from obstore.store import from_url
from platformkit.cli import SERVER_FAILURES
from platformkit.testing.s3 import S3Server, aim
from platformkit.testing.services import free_port
from strataplane.actions import teams
from strataplane.actions.context import Ctx
from strataplane.cli import app
from strataplane.controllers.audit_bucket import BucketShipper
from strataplane.domain.audit_bucket import exported_through, object_key, span_of
from strataplane.testing import Seed
from typer.testing import CliRunner
from wirekit import clierrors

TENANT = UUID("01900000-0000-7000-8000-000000000001")


@given(st.integers(1, 10**12), st.integers(0, 10**6), st.sampled_from(["", "audit", "a/b/"]))
def test_object_names_carry_their_span_and_sort_as_the_events(
    first: int, more: int, prefix: str
) -> None:
    key = object_key(prefix, TENANT, first, first + more)
    assert span_of(key) == (first, first + more)
    assert key.startswith(f"{prefix.strip('/')}/{TENANT}/" if prefix.strip("/") else str(TENANT))
    later = object_key(prefix, TENANT, first + more + 1, first + more + 1)
    assert key < later
    assert exported_through([later, key, f"{prefix}/{TENANT}/notes.txt"]) == first + more + 1


def test_other_objects_and_bad_spans_are_not_progress() -> None:
    assert exported_through([]) == 0
    assert span_of("x/notes.jsonl") is None
    assert span_of(f"{'0' * 20}-{'0' * 20}.jsonl") is None  # seqs start at 1
    assert span_of(f"{2:020d}-{1:020d}.jsonl") is None
    with pytest.raises(ValueError, match="not a span"):
        object_key("", TENANT, 5, 4)


@pytest.fixture
def bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"audit-{uuid.uuid4().hex[:12]}"
    aim(monkeypatch, s3_server.endpoint)
    s3_server.make_bucket(name)
    return name


async def _tenant(seed: Seed, teams_made: int) -> Ctx:
    tenant, admin = await seed.tenant()
    ctx = seed.ctx(admin, tenant.id)
    for n in range(teams_made):
        await teams.create_team(ctx, f"team-{n}", f"Team {n}")
    return ctx


def _objects(bucket: str, prefix: str) -> dict[str, list[dict[str, object]]]:
    store = from_url(f"s3://{bucket}")
    out = {}
    for page in obstore.list(store, prefix):
        for meta in page:
            body = bytes(obstore.get(store, meta["path"]).bytes())
            out[str(meta["path"])] = [json.loads(line) for line in body.splitlines()]
    return out


async def test_batches_go_up_in_order_and_a_restart_goes_on_where_the_bucket_says(
    sp_seed: Seed, bucket: str
) -> None:
    ctx = await _tenant(sp_seed, 5)
    store = from_url(f"s3://{bucket}")
    first = BucketShipper(sp_seed.services.pool, store, "audit", batch=2)
    [done] = await first.run_once([ctx.tenant_id])
    assert (done.error, done.backlog) == (None, 0)
    assert done.shipped == done.through == done.latest >= 6  # the tenant, its admin, 5 teams
    objects = _objects(bucket, f"audit/{ctx.tenant_id}/")
    assert all(len(events) <= 2 for events in objects.values())
    seqs = [e["seq"] for key in sorted(objects) for e in objects[key]]
    assert seqs == list(range(1, done.latest + 1))
    for key, events in objects.items():
        assert span_of(key) == (events[0]["seq"], events[-1]["seq"])
    assert objects[sorted(objects)[-1]][-1]["action"] == "team.create"
    assert all(e["hash"] for events in objects.values() for e in events)
    # a new process knows nothing but the bucket: it ships only what came after
    await teams.create_team(ctx, "late", "Late")
    second = BucketShipper(sp_seed.services.pool, from_url(f"s3://{bucket}"), "audit", batch=2)
    [again] = await second.run_once([ctx.tenant_id])
    assert (again.shipped, again.through, again.backlog) == (1, done.latest + 1, 0)
    objects = _objects(bucket, "audit/")
    seqs = [e["seq"] for key in sorted(objects) for e in objects[key]]
    assert seqs == list(range(1, done.latest + 2))


async def test_a_store_that_is_away_loses_nothing_and_shows_the_backlog(
    sp_seed: Seed, bucket: str, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server
) -> None:
    ctx = await _tenant(sp_seed, 3)
    aim(monkeypatch, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    away = from_url(
        f"s3://{bucket}", client_options={"timeout": "2s"}, retry_config={"max_retries": 0}
    )
    [failed] = await BucketShipper(sp_seed.services.pool, away, "audit").run_once([ctx.tenant_id])
    assert failed.error is not None
    assert (failed.shipped, failed.through) == (0, 0)
    assert failed.backlog == failed.latest >= 4
    aim(monkeypatch, s3_server.endpoint)
    back = BucketShipper(sp_seed.services.pool, from_url(f"s3://{bucket}"), "audit")
    [done] = await back.run_once([ctx.tenant_id])
    assert (done.error, done.shipped, done.backlog) == (None, failed.latest, 0)


async def test_the_cli_ships_and_prints_progress_as_json(
    sp_seed: Seed, bucket: str, strataplane_database: str, tmp_path: Path
) -> None:
    ctx = await _tenant(sp_seed, 2)
    runner = CliRunner()
    args = ["audit", "ship", f"s3://{bucket}/exports", "--tenant", str(ctx.tenant_id)]
    args += ["--database-url", strataplane_database, "--batch", "3"]
    result = await asyncio.to_thread(runner.invoke, app, args)
    assert result.exit_code == 0, result.output
    [line] = [json.loads(x) for x in result.output.splitlines() if x.startswith("{")]
    assert line["tenant"] == str(ctx.tenant_id)
    assert line["backlog"] == 0
    assert line["shipped"] == line["latest"] >= 3
    assert len(_objects(bucket, f"exports/{ctx.tenant_id}/")) == -(-line["latest"] // 3)
    again = await asyncio.to_thread(runner.invoke, app, args)
    assert json.loads(again.output.splitlines()[-1])["shipped"] == 0


def ship_fails(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """The one line ``strataplane audit ship`` ends with (exit 1), no traceback."""
    with pytest.raises(SystemExit) as ended:
        clierrors.run(app, ["audit", "ship", *args], known=SERVER_FAILURES)
    err = capsys.readouterr().err
    assert ended.value.code == 1, err
    [line] = err.splitlines()
    assert "Traceback" not in err
    return line


@pytest.mark.parametrize(
    "bucket",
    ["s3://[::1", "ftp://host/x", "notaurl", "", "s3://", "s3://b/../x", "s3://b/a%ff",
     "s3://b/a\udc80", "s3://b/a\x00", "s3://b/" + "x" * 3000],
)  # fmt: skip
def test_a_hostile_bucket_is_one_error_line(
    capsys: pytest.CaptureFixture[str], bucket: str
) -> None:
    line = ship_fails(capsys, [bucket, "--database-url", "postgresql://x@127.0.0.1:1/x"])
    assert line.startswith("error: validation_failed: bucket: "), line


async def test_a_hostile_tenant_is_one_error_line(
    capsys: pytest.CaptureFixture[str], strataplane_database: str
) -> None:
    for tenant in ("a\udc80", "a\x00", "x" * 5000, "", str(2**70)):
        args = ["s3://bucket/audit", "--tenant", tenant, "--database-url", strataplane_database]
        line = await asyncio.to_thread(ship_fails, capsys, args)
        assert line.startswith("error: tenant.not_found: "), (tenant[:20], line)
