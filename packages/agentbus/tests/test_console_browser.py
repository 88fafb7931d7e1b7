"""The console in Chromium against a real gateway process (chDB analytics inside it), NATS and
PostgreSQL: sign in with a one-time link, then every page with what the traffic left behind:
agents with presence and keys, conversations and a message's timeline, the task board, dead
letters with a redrive, usage and cost charts, the policy editor with its dry run, the audit log
with verify (after a rewritten row, too); live counts arrive by server-sent events; a form
without the session's CSRF token is refused and a used link does not work twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest
from agentbus.actions import tenants
from agentbus.actions.context import Actor, Ctx
from agentbus.actions.users import OwnerSpec
from agentbus.console.sessions import mint_link
from agentbus.e2e import TENANT, WORKSPACE, Stack, open_stack
from agentbus.gateway.domain.wire import format_ts
from agentbus.gateway.testkit import SimAgent, World, enroll, post_envelope
from agentbus.ids import format_id, parse_id
from agentbus.keys import load_or_create_keyring
from agentbus.policies import actions as policies
from agentbus.store.integration_tokens import verify_integration_token
from agentbus.testing import agentbus_template
from platformkit.ids import uuid7
from platformkit.testing.databases import DatabaseFactory

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

OWNER = f"owner@{TENANT}.example"


class Console:
    def __init__(self, stack: Stack, world: World, alice: SimAgent, bob: SimAgent) -> None:
        self.stack, self.world, self.alice, self.bob = stack, world, alice, bob
        self.conversation = ""
        self.dead = ""


@pytest.fixture(scope="module")
async def console(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Console]:
    url = database_factory.create(await agentbus_template(database_factory), stem="agentbus")
    try:
        async with open_stack(url, tmp_path_factory.mktemp("console")) as (stack, token):
            async with stack.app_pool() as pool:
                tenant_id = (await verify_integration_token(pool, token)).tenant_id
            world = World(tenant_id, TENANT, uuid7(), WORKSPACE, token)
            async with httpx.AsyncClient(base_url=stack.url, timeout=60) as client:
                alice = await enroll(client, world, "alice")
                review = [{"name": "code.review", "version": "1", "description": "Review"}]
                bob = await enroll(client, world, "bob", capabilities=review)
                found = Console(stack, world, alice, bob)
                await _exchange(client, found)
                await _wait_for_analytics(client, token)
            yield found
    finally:
        database_factory.drop(url)


async def _exchange(client: httpx.AsyncClient, found: Console) -> None:
    alice, bob = found.alice, found.bob
    hello = alice.envelope(bob.address, {"text": "please review"})
    await post_envelope(client, alice, hello)
    found.conversation = hello["conversation"]
    reply = await client.get("/v1/inbox", params={"wait_s": 10}, headers=bob.headers())
    [delivery] = reply.json()["deliveries"]
    ack = {"msg_id": hello["id"], "ack_token": delivery["ack_token"]}
    await client.post("/v1/inbox/ack", json={"acks": [ack]}, headers=bob.headers())
    read = {"msg_id": hello["id"], "read_at": format_ts(datetime.now(UTC))}
    await client.post("/v1/inbox/read", json={"reads": [read]}, headers=bob.headers())
    answer = bob.envelope(alice.address, {"text": "looks good"}, conversation=hello["conversation"])
    await post_envelope(client, bob, answer)
    await post_envelope(
        client,
        alice,
        alice.task_request(bob.address, "review-1", {"instructions": "review the diff"}),
    )
    usage = {"id": format_id("usg", uuid7()), "recorded_at": format_ts(datetime.now(UTC)),
             "harness": "claude", "provider": "anthropic", "model": "claude-sonnet-4-5-20250929",
             "input_tokens": 200_000, "output_tokens": 1_000}  # fmt: skip
    assert (await client.post("/v1/usage", json={"records": [usage]},
                              headers=bob.headers())).status_code == 202  # fmt: skip
    lost = alice.envelope(bob.address, {"text": "this one is lost"})
    await post_envelope(client, alice, lost)
    found.dead = lost["id"]
    with psycopg.connect(found.stack.database_url) as conn:  # as the dead-letter worker leaves it
        msg = parse_id("msg", lost["id"])
        conn.execute("UPDATE messages SET status = 'dead_lettered' WHERE id = %s", (msg,))


async def _wait_for_analytics(client: httpx.AsyncClient, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        cost = (await client.get("/v1/analytics/cost", headers=headers)).json()
        graph = (await client.get("/v1/analytics/graph", headers=headers)).json()
        if cost.get("rows") and len(graph.get("edges", [])) >= 2:
            return
        await asyncio.sleep(0.5)
    raise AssertionError("the gateway's ingester did not bring the traffic into chDB in 90 s")


async def _signed_in(console: Console, page: Any) -> None:
    async with console.stack.app_pool() as pool:
        link = await mint_link(pool, console.world.tenant_id, OWNER)
    await page.goto(f"{console.stack.url}/console/sign-in?link={link}")
    await page.click("button:has-text('Sign in')")
    await page.wait_for_url(f"{console.stack.url}/console")


async def test_sign_in_overview_and_live_counts(console: Console, page: Any) -> None:
    await page.goto(f"{console.stack.url}/console/agents")
    assert page.url.endswith("/console/sign-in")  # no session: the sign-in page
    await _signed_in(console, page)
    assert await page.title() == "Overview · AgentBus console"
    rows = await page.locator("#latency tbody tr").all_inner_texts()
    assert [r.split()[0] for r in rows] == ["accept", "publish", "deliver", "read"]
    assert await page.locator("svg.graph line.edge").count() >= 2
    assert await page.locator("svg.graph text", has_text="alice").count() == 1
    # the first server-sent event has been applied (the page's CSP forbids evaluated scripts)
    await page.wait_for_selector("body[data-live-updated]", state="attached", timeout=60_000)
    assert await page.locator('[data-count="dead_letters"]').inner_text() == "1"
    [cookie] = [c for c in await page.context.cookies() if c["name"] == "agentbus_console"]
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")


async def test_agents_with_presence_and_keys(console: Console, page: Any) -> None:
    await _signed_in(console, page)
    await page.click("nav >> text=Agents")
    names = await page.locator("#agents tbody tr td:first-child").all_inner_texts()
    assert [n.split()[0] for n in names] == ["alice", "bob"]
    assert await page.locator("#agents tbody tr code").count() == 2  # a key each


async def test_a_conversation_and_its_timeline(console: Console, page: Any) -> None:
    await _signed_in(console, page)
    await page.click("nav >> text=Conversations")
    await page.click(f"a[href='/console/conversations/{console.conversation}']")
    assert await page.locator("#messages tbody tr").count() == 2
    assert await page.locator("svg.timeline rect.span").count() == 2
    first = page.locator("details.hop").first
    assert "message.read" in await first.inner_text()
    assert "deliver" in await first.locator("summary").inner_text()
    elsewhere = await page.goto(f"{console.stack.url}/console/conversations/"
                                f"{format_id('cnv', uuid7())}")  # fmt: skip
    assert elsewhere is not None
    assert elsewhere.status == 404


async def test_the_task_board(console: Console, page: Any) -> None:
    await _signed_in(console, page)
    await page.click("nav >> text=Tasks")
    columns = await page.locator(".board .column h2").all_inner_texts()
    assert columns[0].startswith("submitted")
    cards = page.locator(".column .card")
    assert await cards.count() == 1
    assert "code.review" in await cards.first.inner_text()


async def test_dead_letters_and_a_redrive(console: Console, page: Any) -> None:
    await _signed_in(console, page)
    await page.click("nav >> text=Dead letters")
    assert console.dead in await page.locator("#dead-letters").inner_text()
    forged = await page.request.post(
        f"{console.stack.url}/console/dead-letters/{console.dead}/redrive",
        form={"csrf": "0" * 64},
    )
    assert forged.status == 403
    await page.click("button:has-text('Redrive')")
    notice = await page.locator(".notice").inner_text()
    assert notice == f"{console.dead} was redriven"
    assert "No dead letters." in await page.locator("#dead-letters").inner_text()


async def test_usage_and_cost(console: Console, page: Any) -> None:
    await _signed_in(console, page)
    await page.click("nav >> text=Usage and cost")
    assert await page.locator("svg.chart rect.bar").count() == 1
    rows = await page.locator("#cost-agents tbody tr").all_inner_texts()
    assert len(rows) == 1
    assert rows[0].split()[:2] == ["bob", "harness"]
    assert "claude-sonnet-4-5-20250929" in await page.locator("#cost-models").inner_text()


async def test_a_link_works_once_and_sign_out_ends_the_session(console: Console, page: Any) -> None:
    async with console.stack.app_pool() as pool:
        link = await mint_link(pool, console.world.tenant_id, OWNER)
    await page.goto(f"{console.stack.url}/console/sign-in?link={link}")
    await page.click("button:has-text('Sign in')")
    await page.click("button:has-text('Sign out')")
    await page.goto(f"{console.stack.url}/console/tasks")
    assert page.url.endswith("/console/sign-in")
    await page.goto(f"{console.stack.url}/console/sign-in?link={link}")
    await page.click("button:has-text('Sign in')")
    assert "not valid any more" in await page.locator(".notice").inner_text()


NO_BOB = 'forbid(principal, action == AgentBus::Action::"send", resource)\n' \
    '  when { resource.name == "bob" };\n'  # fmt: skip


async def test_the_policy_editor_and_its_dry_run(console: Console, page: Any) -> None:
    await _signed_in(console, page)
    await page.click("nav >> text=Policies")
    await page.fill("input[name=name]", "no-bob")
    await page.fill("textarea[name=cedar]", "forbid(principal, action, resource) when { x };")
    await page.click("button:has-text('Create policy')")
    assert await page.locator(".errors li").count() >= 1  # the validator's errors, not a 500
    assert "no-bob" not in await page.locator("#policies").inner_text()
    await page.fill("textarea[name=cedar]", NO_BOB)
    await page.click("button:has-text('Dry run')")
    refused = await page.locator("#dry-run tbody tr").all_inner_texts()
    assert refused
    assert all(r.split()[2:5] == ["alice", "bob", "send"] for r in refused)
    assert all("no-bob" in r for r in refused)
    assert await page.input_value("textarea[name=cedar]") == NO_BOB  # the draft is kept
    assert "no-bob" not in await page.locator("#policies").inner_text()  # nothing stored
    await page.click("button:has-text('Create policy')")
    assert await page.locator(".notice").inner_text() == "no-bob v1 was created"
    assert "no-bob v1 is enabled" in await page.locator("#policy-state").inner_text()
    assert await page.locator("#cedar").inner_text() == NO_BOB
    ref = page.url.rsplit("/", 1)[1].split("?")[0]
    forged = await page.request.post(
        f"{console.stack.url}/console/policies/{ref}/enabled",
        form={"csrf": "0" * 64, "enabled": "false"},
    )
    assert forged.status == 403
    await page.click("button:has-text('Disable')")
    assert "no-bob v1 is disabled" in await page.locator("#policy-state").inner_text()
    await page.click("button:has-text('Enable')")
    assert "no-bob v1 is enabled" in await page.locator("#policy-state").inner_text()
    await page.click("nav >> text=Policies")
    listed = await page.locator("#policies tbody tr").all_inner_texts()
    assert [r.split()[:2] for r in listed] == [["default", "v1"], ["no-bob", "v1"]]
    theirs = await _another_tenants_policy(console)
    csrf = await page.input_value("form.signout input[name=csrf]")
    toggled = await page.request.post(f"{console.stack.url}/console/policies/{theirs}/enabled",
                                      form={"csrf": csrf, "enabled": "false"})  # fmt: skip
    assert toggled.status == 404
    for ref in (theirs, format_id("pol", uuid7())):
        elsewhere = await page.goto(f"{console.stack.url}/console/policies/{ref}")
        assert elsewhere is not None
        assert elsewhere.status == 404


async def _another_tenants_policy(console: Console) -> str:
    ring = load_or_create_keyring(console.stack.config_dir / "keyring.json")
    async with console.stack.app_pool() as pool:
        operator = Ctx(pool, Actor.operator("cli:test"), keyring=ring)
        owner = OwnerSpec("owner@globex.example", "oidc:test", "globex-owner")
        created = await tenants.create_tenant(operator, slug="globex", display_name="Globex",
                                              owner=owner)  # fmt: skip
        assert created.owner_user is not None
        tid = created.tenant["id"]
        as_owner = Ctx(pool, Actor.user(tid, created.owner_user["id"]))
        row = await policies.create_policy(as_owner, tid, name="theirs", cedar=NO_BOB,
                                           workspace_id=None)  # fmt: skip
    return format_id("pol", row["id"])


async def test_the_audit_log_and_verify(console: Console, page: Any) -> None:
    await _signed_in(console, page)
    await page.click("nav >> text=Policies")
    await page.fill("input[name=name]", "audited")
    await page.fill("textarea[name=cedar]", "permit(principal, action, resource);")
    await page.click("button:has-text('Create policy')")
    ref = page.url.rsplit("/", 1)[1].split("?")[0]
    await page.click("nav >> text=Audit log")
    rows = await page.locator("#audit tbody tr").all_inner_texts()
    seqs = [int(r.split()[0]) for r in rows]
    assert seqs == sorted(seqs, reverse=True)  # newest first
    assert f"policy.create {ref}" in rows[0]
    await page.click("button:has-text('Verify')")
    verdict = await page.locator("#verify").inner_text()
    assert verdict.startswith("The chain verifies:")
    assert f"up to seq {seqs[0]}" in verdict
    # the last test of the module: a signed checkpoint, then the policy.create row rewritten
    headers = {"Authorization": f"Bearer {console.world.token}"}
    async with httpx.AsyncClient(base_url=console.stack.url, timeout=60) as client:
        made = await client.post("/v1/audit/checkpoints", headers=headers)
    checkpoint = made.json()["seq"]
    with psycopg.connect(console.stack.database_url) as conn:
        conn.execute("UPDATE audit_chain SET summary = 'policy.disable' WHERE tenant_id = %s"
                     " AND seq = %s", (console.world.tenant_id, seqs[0]))  # fmt: skip
    await page.click("button:has-text('Verify')")
    verdict = await page.locator("#verify").inner_text()
    assert verdict.startswith(f"The chain does not verify: the first bad row is seq {seqs[0]}")
    assert f"It breaks the checkpoint at seq {checkpoint}" in verdict
