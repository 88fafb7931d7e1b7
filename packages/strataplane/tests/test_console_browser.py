"""The console in Debian's Chromium against the real server (granian in its own process) with
simulated Telegrafs: sign-in by keyboard, the fleet overview and its label filter, a live
update pushed over SSE, an agent's page, the audit log's verify, single sign-on through a
provider on loopback, sign-out, and an accessibility check of the main pages. Screenshots land
in the test's tmp_path."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from platformkit.testing.oidc import OidcProvider
from strataplane.actions import change_sets, fleet_enrollment, reviews, spec, validation
from strataplane.actions.context import Services
from strataplane.simulate.http import HttpPool
from strataplane.simulate.seed import publish
from strataplane.simulate.telegraf import SimulatedTelegraf
from strataplane.testing import PASSWORD, Seed
from strataplane.testing.served import enroll, platform_tenant, stop
from strataplane.testing.spec_files import TELEGRAF_ROUTE, fleet_settings, telegraf_layer

pytestmark = pytest.mark.long_module  # minutes: run first (platformkit.testing.plugin)

WAIT = 90_000  # ms: a generous ceiling for each condition, on a busy machine
SECRET = "console test client secret"
# A canary stage that bakes long enough for a person to stop the rollout.
POLICY = """owner = "platform"
agentKinds = ["telegraf"]

[[stages]]
name = "canary"
bakeTime = "10m"
selector = { matchLabels = { env = "prod" } }

[[stages]]
name = "everything"
bakeTime = "1s"

[guardrails]
maxApplyFailurePercent = 0
"""
LAYER = telegraf_layer()
TREE = {
    "layers/base.toml": LAYER,
    "routes/influx.toml": TELEGRAF_ROUTE,
    "settings.toml": fleet_settings("telegraf", default_policy="staged"),
    "policies/rollout/staged.toml": POLICY,
}

# The accessibility rules the main pages must keep (run in the page).
A11Y = """() => {
  const problems = [];
  const visible = (el) => el.offsetParent !== null || el.getClientRects().length > 0;
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden' || !visible(el)) continue;
    const named = (el.labels && el.labels.length) || el.getAttribute('aria-label');
    if (!named) problems.push('unlabelled ' + el.outerHTML.slice(0, 80));
  }
  for (const el of document.querySelectorAll('button, a[href]')) {
    if (!el.textContent.trim() && !el.getAttribute('aria-label'))
      problems.push('unnamed ' + el.outerHTML.slice(0, 80));
    if (el.tabIndex < 0) problems.push('not focusable ' + el.outerHTML.slice(0, 80));
  }
  for (const svg of document.querySelectorAll('svg')) {
    if (svg.getAttribute('role') !== 'img' || !svg.getAttribute('aria-label'))
      problems.push('svg without role/label');
  }
  for (const t of document.querySelectorAll('table')) {
    if (!t.querySelector('th')) problems.push('table without headers');
  }
  if (document.querySelectorAll('h1').length !== 1) problems.push('not exactly one h1');
  if (!document.documentElement.lang) problems.push('no lang');
  if (!document.querySelector('main')) problems.push('no main landmark');
  return problems;
}"""


@dataclass
class World:
    url: str
    services: Services
    tenant_id: UUID
    admin: str
    pool: HttpPool
    enroll_token: str
    dev_token: str
    provider: OidcProvider
    approver: str
    admin_ctx: Any

    async def enroll(self, name: str, token: str | None = None) -> dict[str, Any]:
        return await enroll(self.pool, token or self.enroll_token, name)


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with OidcProvider("strataplane", SECRET) as running:
        running.person = {"sub": "idp|ada", "name": "Ada Lovelace", "groups": ["sre"]}
        yield running


@pytest.fixture(scope="module")
def served_settings(provider: OidcProvider) -> dict[str, str]:
    return {
        "oidc_issuer": provider.issuer,
        "oidc_client_id": "strataplane",
        "oidc_client_secret": SECRET,
        "oidc_tenant": "acme",
    }


@pytest.fixture(scope="module")
async def world(served: str, served_seed: Seed, provider: OidcProvider) -> AsyncIterator[World]:
    seed, services = served_seed, served_seed.services
    tenant, admin, ctx = await platform_tenant(seed, "acme")
    prod = await fleet_enrollment.create_enrollment_token(ctx, "prod", labels={"env": "prod"})
    dev = await fleet_enrollment.create_enrollment_token(ctx, "dev", labels={"env": "dev"})
    await publish(services.pool, tenant.id, TREE)
    approver = await seed.member(ctx, "approver")
    http = HttpPool(served, size=10)
    world = World(served, services, tenant.id, admin.subject, http, prod.plaintext,
                  dev.plaintext, provider, approver.subject, ctx)  # fmt: skip
    running = await world.enroll("web-1")
    await world.enroll("db-1", dev.plaintext)
    sim = SimulatedTelegraf(http, "/agents/telegraf/config", dict(running["environment"]),
                            watch_interval=0.3, retry_delay=0.1,
                            restart_after=1.0)  # fmt: skip
    task = asyncio.create_task(sim.run())
    yield world
    await stop([task])
    await http.close()


async def browser_as(chromium: Any, world: World, username: str) -> Any:
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(WAIT)
    await page.goto(f"{world.url}/login")
    await page.fill("#username", username)
    await page.fill("#password", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_url("**/fleet")
    return page


@pytest.fixture
async def signed_in(chromium: Any, world: World) -> AsyncIterator[Any]:
    page = await browser_as(chromium, world, world.admin)
    yield page
    await page.context.close()


async def count(page: Any, name: str) -> str:
    text: str = await page.locator(f"[data-count={name}]").inner_text()
    return text


async def test_sign_in_by_keyboard_and_the_overview(
    chromium: Any, world: World, tmp_path: Path
) -> None:
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(WAIT)
    await page.goto(f"{world.url}/fleet")
    assert "/login?next=/fleet" in page.url
    await page.keyboard.type(world.admin)  # the username field has focus on arrival
    await page.keyboard.press("Tab")
    await page.keyboard.type(PASSWORD)
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/fleet")
    await page.locator("[data-count=agents]", has_text="2").wait_for()
    assert await count(page, "hosts") == "2"
    await page.locator("[data-count=in-sync]", has_text="1").wait_for()  # web-1 applied it
    kinds = await page.locator("svg[aria-label^='Agents by kind']").get_attribute("aria-label")
    assert kinds == "Agents by kind: telegraf: 2"
    await page.locator("svg[aria-label='Agents in sync: 50%']").wait_for()
    await page.screenshot(path=str(tmp_path / "fleet.png"), full_page=True)

    await page.fill("#label", "env=dev")
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/fleet?label=env%3Ddev")
    assert await count(page, "agents") == "1"
    assert await page.locator("tr[data-agent=db-1]").count() == 1
    assert await page.locator("tr[data-agent=web-1]").count() == 0
    await context.close()


async def test_the_overview_updates_live(signed_in: Any, world: World) -> None:
    page = signed_in
    await page.locator("#live.on").wait_for()  # the event stream is open
    await page.evaluate("window.__same_page = true")
    before = int(await count(page, "agents"))
    await world.enroll(f"live-{before}")
    await page.locator("[data-count=agents]", has_text=str(before + 1)).wait_for()
    assert await page.evaluate("window.__same_page") is True  # no reload: the fragment swapped
    assert await page.locator(f"tr[data-agent=live-{before}]").count() == 1


async def test_an_agents_page_explains_it(signed_in: Any, world: World, tmp_path: Path) -> None:
    page = signed_in
    await page.click("tr[data-agent=web-1] a")
    await page.wait_for_url("**/fleet/agents/*")
    desired = await page.locator("[data-field=desired]").inner_text()
    assert desired.isdigit()
    assert await page.locator("[data-field=applied]").inner_text() == desired
    artifact = await page.locator("pre[data-artifact]").inner_text()
    assert "[[outputs.influxdb_v2]]" in artifact
    assert "layers/base.toml" in await page.locator("#explain-h + p").inner_text()
    history = page.locator("section[aria-labelledby=hist-h] tbody tr")
    assert await history.count() >= 1
    await page.screenshot(path=str(tmp_path / "agent.png"), full_page=True)


async def test_the_audit_log_verifies(signed_in: Any) -> None:
    page = signed_in
    await page.click("nav >> text=Audit log")
    await page.wait_for_url("**/audit")
    assert await page.locator("code", has_text="session.create").count() >= 1
    await page.click("text=Verify the chain")
    status = page.locator("[data-verify]")
    assert await status.get_attribute("data-verify") == "ok"
    assert "The chain is intact" in await status.inner_text()


async def test_sign_out(signed_in: Any, world: World) -> None:
    page = signed_in
    await page.click("text=Sign out")
    await page.wait_for_url("**/login")
    await page.goto(f"{world.url}/audit")
    assert "/login?next=/audit" in page.url


async def test_single_sign_on_in_the_browser(chromium: Any, world: World) -> None:
    context = await chromium.new_context()
    page = await context.new_page()
    page.set_default_timeout(WAIT)
    await page.goto(f"{world.url}/audit")
    await page.click("text=Sign in with Single sign-on")
    await page.wait_for_url("**/audit")  # through the provider and back, where it was going
    assert await page.locator(".who span").inner_text() == "Ada Lovelace"
    assert world.provider.authorize_requests[-1]["code_challenge_method"] == "S256"
    await context.close()


async def test_main_pages_pass_the_accessibility_rules(signed_in: Any, world: World) -> None:
    page = signed_in
    agent = await page.locator("tr[data-agent=web-1] a").get_attribute("href")
    for path in ("/fleet", agent, "/spec", "/change-sets", "/rollouts", "/audit",
                 "/admin/people", "/admin/tokens"):  # fmt: skip
        await page.goto(f"{world.url}{path}")
        assert await page.evaluate(A11Y) == [], path
        # keyboard: the first Tab reaches the skip link, which moves focus to the content
        await page.keyboard.press("Tab")
        assert await page.evaluate("document.activeElement.className") == "skip"
        await page.keyboard.press("Enter")
        assert await page.evaluate("document.activeElement.id") == "main"
    context = await page.context.browser.new_context()
    anonymous = await context.new_page()
    await anonymous.goto(f"{world.url}/login")
    assert await anonymous.evaluate(A11Y) == []
    await context.close()


async def proposed(world: World) -> int:
    """A change set by the admin, validated and submitted, as the API would leave it."""
    ctx = world.admin_ctx
    cs = await change_sets.create_change_set(ctx, "Per-CPU metrics")
    edited = LAYER.replace("percpu = false", "percpu = true")
    cs = await spec.write_file(ctx, cs.id, "layers/base.toml", edited.encode(), seen=cs.digest)
    cs = cs.change_set
    op, _ = await validation.request_validation(ctx, cs.id)
    await validation.run_validation(world.services.pool, validation.params_for(op, ctx.principal))
    cs = await change_sets.access_change_set(ctx, cs.id)
    assert cs.validated, json.dumps(cs.validation)[:3000]
    cs = await reviews.submit_change_set(ctx, cs.id, seen=cs.digest)
    return cs.number


async def until_state(page: Any, want: str) -> None:
    """Reload the page until its state reads ``want`` (controllers move rollouts on)."""
    deadline = asyncio.get_running_loop().time() + WAIT / 1000
    while want not in await page.locator("[data-field=state]").inner_text():
        assert asyncio.get_running_loop().time() < deadline, want
        await asyncio.sleep(0.5)
        await page.reload()


async def test_approval_by_a_second_person_merge_and_a_rollout_halted_from_the_console(
    chromium: Any, signed_in: Any, world: World, tmp_path: Path
) -> None:
    number = await proposed(world)
    reviewer = await browser_as(chromium, world, world.approver)
    await reviewer.click("nav >> text=Change sets")
    await reviewer.click(f"tr[data-cs='{number}'] a")
    await reviewer.wait_for_url(f"**/change-sets/{number}")
    diff = await reviewer.locator("pre[data-diff='layers/base.toml']").inner_text()
    assert "+percpu = true" in diff
    assert "-percpu = false" in diff
    assert await reviewer.locator("[data-approved]").get_attribute("data-approved") == "no"
    assert int(await reviewer.locator("[data-impact]").get_attribute("data-impact")) >= 1
    impacted = reviewer.locator("tr[data-impacted-agent=web-1]")
    assert await impacted.count() == 1  # the per-agent preview, before and after
    await reviewer.fill("#comment", "looks right")
    await reviewer.click("button[value=approve]")
    await reviewer.wait_for_url(f"**/change-sets/{number}")
    assert await reviewer.locator("[data-approved]").get_attribute("data-approved") == "yes"
    await reviewer.screenshot(path=str(tmp_path / "change_set.png"), full_page=True)
    await reviewer.context.close()

    page = signed_in  # the author merges
    await page.goto(f"{world.url}/change-sets/{number}")
    assert "looks right" in await page.locator("ul.reviews").inner_text()
    await page.click("text=Merge")
    await page.wait_for_url(f"**/change-sets/{number}")
    assert await page.locator("[data-field=state]").inner_text() == "merged"
    merged = await page.locator("[data-field=merged]").inner_text()

    await page.click("nav >> text=Rollouts")
    row = page.locator("tr[data-rollout]").first
    assert merged.split()[1] in await row.inner_text()  # to the merged revision
    await row.locator("a").click()
    await until_state(page, "running")
    assert await page.locator("tr[data-stage=canary]").count() == 1
    await page.click("button:text('Pause')")
    await until_state(page, "paused")
    await page.click("button:text('Resume')")
    await until_state(page, "running")
    await page.click("button:text('Abort')")
    await until_state(page, "aborted")
    assert await page.locator("button:text('Pause')").count() == 0
    await page.screenshot(path=str(tmp_path / "rollout.png"), full_page=True)


async def test_the_spec_tree_a_files_history_and_a_diff(signed_in: Any, world: World) -> None:
    page = signed_in
    await page.click("nav >> text=Spec")
    await page.wait_for_url("**/spec")
    assert await page.locator("tr[data-path='routes/influx.toml']").count() == 1
    await page.click("tr[data-path='layers/base.toml'] a")
    await page.wait_for_url("**/spec/files/layers/base.toml?revision=*")
    assert "[config.inputs.cpu.default]" in await page.locator("pre[data-content]").inner_text()
    assert await page.locator("tr[data-version]").count() >= 1
    await page.goto(f"{world.url}/spec")
    await page.fill("#diff-a", "1")
    await page.fill("#diff-b", "1")
    await page.click("text=Diff")
    await page.wait_for_url("**/spec/diff?a=1&b=1")
    assert await page.locator("h1").inner_text() == "From revision 1 to 1"
    assert "No changes." in await page.locator("main").inner_text()


async def test_admin_pages_teams_tokens_and_members(signed_in: Any, world: World) -> None:
    page = signed_in
    await page.click("nav >> text=People")
    await page.fill("#team-slug", "oncall")
    await page.fill("#team-name", "On call")
    await page.fill("#team-group", "sre-oncall")
    await page.click("text=Create team")
    await page.wait_for_url("**/admin/people")
    row = await page.locator("tr[data-team=oncall]").inner_text()
    assert "oidc" in row
    assert "sre-oncall" in row

    await page.select_option("#bind-role", "operator")
    await page.select_option("#bind-subject", label="oncall")
    await page.click("button:text-is('Bind')")
    await page.wait_for_url("**/admin/people")
    binding = page.locator("tr[data-binding='operator oncall']")
    assert await binding.count() == 1
    await binding.locator("button:text('Remove')").click()
    await page.wait_for_url("**/admin/people")
    assert await binding.count() == 0

    member = page.locator(f"tr[data-member='{world.approver}']")
    await member.locator("button:text('Disable')").click()
    await page.wait_for_url("**/admin/people")
    assert "disabled" in await member.inner_text()
    await member.locator("button:text('Enable')").click()
    await page.wait_for_url("**/admin/people")
    assert "active" in await member.inner_text()

    await page.click("nav >> text=Tokens")
    await page.fill("#token-name", "deploy-bot")
    await page.click("text=Create API token")
    shown = await page.locator("input[data-created]").input_value()
    assert shown.startswith("spk_")
    reply = await world.pool.request("GET", "/api/v1/auth/me", {"Authorization": f"Bearer {shown}"})
    assert reply.status == 200  # the token works
    await page.goto(f"{world.url}/admin/tokens")
    assert await page.locator("input[data-created]").count() == 0  # shown once only
    await page.locator("tr[data-token=deploy-bot] button:text('Revoke')").click()
    await page.wait_for_url("**/admin/tokens")
    assert "revoked" in await page.locator("tr[data-token=deploy-bot]").inner_text()
    reply = await world.pool.request("GET", "/api/v1/auth/me", {"Authorization": f"Bearer {shown}"})
    assert reply.status == 401

    await page.fill("#enroll-name", "edge")
    await page.select_option("#enroll-kind", "vector")
    await page.fill("#enroll-labels", "env=edge")
    await page.click("text=Create enrolment token")
    assert (await page.locator("input[data-created]").input_value()).startswith("spn_")
    await page.goto(f"{world.url}/admin/tokens")
    assert "env=edge" in await page.locator("tr[data-enrollment=edge]").inner_text()


async def test_a_change_set_edited_in_the_browser_checked_as_you_type(
    signed_in: Any, world: World, tmp_path: Path
) -> None:
    page = signed_in
    await page.click("nav >> text=Change sets")
    await page.fill("#new-title", "Memory input")
    await page.click("button:text('Create')")
    await page.wait_for_url("**/change-sets/*/edit")
    await page.fill("#path", "layers/mem.toml")
    await page.locator("#content").press_sequentially('agentKind = "telegraf"\nowner = ')
    await page.locator("[data-accepted=no]").wait_for()  # not saved: checked as typed
    assert await page.locator("#check li").count() >= 1
    good = '"platform"\n\n[config.inputs.mem.default]\n'
    await page.locator("#content").press_sequentially(good)
    await page.locator("[data-accepted=yes]").wait_for()
    await page.screenshot(path=str(tmp_path / "edit.png"), full_page=True)
    await page.click("text=Save to the change set")
    await page.wait_for_url("**/change-sets/*")
    assert (
        "+[config.inputs.mem.default]"
        in await page.locator("pre[data-diff='layers/mem.toml']").inner_text()
    )
    await page.click("button:text('Validate')")
    deadline = asyncio.get_running_loop().time() + WAIT / 1000
    while "yes" not in await page.locator("[data-field=validated]").inner_text():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.5)
        await page.reload()
    await page.click("button:text('Submit for review')")
    await page.wait_for_url("**/change-sets/*")
    assert await page.locator("[data-field=state]").inner_text() == "in review"


async def test_pin_an_agent_from_its_page_and_remove_the_pin(signed_in: Any) -> None:
    page = signed_in
    await page.click("tr[data-agent=web-1] a")
    await page.wait_for_url("**/fleet/agents/*")
    await page.fill("#pin-reason", "incident 42: hold the known good config")
    await page.click("button:text('Pin')")
    await page.wait_for_url("**/rollouts")
    pinned = page.locator("tr[data-pin='incident 42: hold the known good config']")
    assert "one agent" in await pinned.inner_text()
    await pinned.locator("button:text('Remove pin')").click()
    await page.wait_for_url("**/rollouts")
    assert await pinned.count() == 0


async def test_delete_a_file_close_rebase_revert_and_add_a_member(
    chromium: Any, signed_in: Any, world: World
) -> None:
    page = signed_in
    await page.goto(f"{world.url}/change-sets")
    await page.fill("#new-title", "Drop the route")
    await page.click("button:text('Create')")
    await page.wait_for_url("**/change-sets/*/edit")
    await page.goto(f"{page.url}?path=routes/influx.toml")
    await page.click("button:text('Delete routes/influx.toml in this change set')")
    await page.wait_for_url("**/change-sets/*")
    removed = await page.locator("pre[data-diff='routes/influx.toml']").inner_text()
    assert "-[config.outputs.influxdb_v2.main]" in removed
    await page.click("button:text('Close')")
    await page.wait_for_url("**/change-sets/*")
    assert await page.locator("[data-field=state]").inner_text() == "closed"

    await page.goto(f"{world.url}/change-sets")
    await page.fill("#new-title", "Disk input")
    await page.click("button:text('Create')")
    await page.wait_for_url("**/change-sets/*/edit")
    await page.fill("#path", "layers/disk.toml")
    await page.fill("#content", LAYER.replace("cpu", "disk"))
    await page.click("text=Save to the change set")
    await page.wait_for_url("**/change-sets/*")
    drafted = page.url
    base = await page.locator("[data-field=base]").inner_text()
    extra = {**TREE, "layers/extra.toml": LAYER.replace("cpu", "mem")}
    newer = await publish(world.services.pool, world.tenant_id, extra, "meanwhile")
    assert base != f"revision {newer}"
    await page.click("button:text('Rebase onto the latest revision')")
    await page.wait_for_url(drafted)
    assert await page.locator("[data-field=base]").inner_text() == f"revision {newer}"
    assert await page.locator("pre[data-diff='layers/disk.toml']").count() == 1
    await page.click("button:text('Close')")
    await page.wait_for_url(drafted)

    await page.goto(f"{world.url}/spec?revision={newer}")
    await page.click(f"button:text('Revert revision {newer}')")
    await page.wait_for_url("**/change-sets/*")
    assert f"Revert r{newer}" in await page.locator("h1").inner_text()
    assert await page.locator("[data-field=state]").inner_text() == "draft"
    undone = await page.locator("pre[data-diff='layers/extra.toml']").inner_text()
    assert "-[config.inputs.mem.default]" in undone
    await page.click("button:text('Close')")
    await page.wait_for_url("**/change-sets/*")

    await page.click("nav >> text=People")
    await page.fill("#member-username", "grace")
    await page.fill("#member-email", "grace@example.com")
    await page.fill("#member-name", "Grace Hopper")
    await page.fill("#member-password", PASSWORD)
    await page.select_option("#member-role", "viewer")
    await page.click("button:text('Add member')")
    await page.wait_for_url("**/admin/people")
    assert "Grace Hopper" in await page.locator("tr[data-member=grace]").inner_text()
    assert await page.locator("tr[data-binding='viewer Grace Hopper']").count() == 1
    grace = await browser_as(chromium, world, "grace")  # the new member signs in
    assert "web-1" in await grace.locator("main").inner_text()
    await grace.context.close()


async def test_a_failed_single_sign_on_is_a_page_with_the_way_back(
    chromium: Any, world: World
) -> None:
    context = await chromium.new_context()
    page = await context.new_page()
    page.set_default_timeout(WAIT)
    alert = page.locator("main [role=alert]")
    # a callback this browser never started: the state is not its own
    answer = await page.goto(f"{world.url}/api/v1/auth/oidc/callback?code=c&state=s")
    assert answer.status == 401
    assert "started in another browser" in await alert.inner_text()
    assert await page.evaluate(A11Y) == []
    provider, person = world.provider, world.provider.person
    try:
        provider.person = None  # the provider refuses: error=access_denied
        await page.goto(f"{world.url}/login")
        await page.click("text=Sign in with Single sign-on")
        await alert.wait_for()
        assert "did not sign you in" in await alert.inner_text()
        provider.person, provider.sign_with_other_key = person, True  # a forged ID token
        await page.click("text=Back to sign-in")
        await page.wait_for_url("**/login")
        await page.click("text=Sign in with Single sign-on")
        await alert.wait_for()
        assert "Single sign-on did not complete" in await page.locator("h1").inner_text()
        assert "/api/v1/auth/oidc/callback" in page.url
    finally:
        provider.person, provider.sign_with_other_key = person, False
    assert "sp_session" not in {c["name"] for c in await context.cookies()}
    api = await world.pool.request("GET", "/api/v1/auth/oidc/callback?code=c&state=s", {})
    assert api.status == 401  # the API's clients keep problem+json
    assert json.loads(api.body)["code"] == "auth.oidc_failed"
    await context.close()


async def sign_in_to_choose(chromium: Any, world: World, username: str) -> Any:
    """A person of the installation who is a member of no tenant: the chooser after sign-in."""
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(WAIT)
    await page.goto(f"{world.url}/login")
    await page.fill("#username", username)
    await page.fill("#password", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_url(re.compile(r"/login/choose\?next="))
    return page


async def refusal(page: Any, status: int, words: str) -> None:
    """The page answered ``status`` and says why, on the form's own page."""
    text = await page.locator("#refusal").inner_text()
    assert words in text, text
    answered = "performance.getEntriesByType('navigation')[0].responseStatus"
    assert await page.evaluate(answered) == status
    assert await page.evaluate(A11Y) == []


async def test_invite_a_person_teams_scoped_bindings_and_removing_members(
    chromium: Any, signed_in: Any, world: World
) -> None:
    page = signed_in
    await Seed(world.services).user("lin")  # a person of the installation, of no tenant yet
    await page.click("nav >> text=People")
    await page.fill("#invite-login", "nobody-at-all")
    await page.click("button:text-is('Invite')")
    await refusal(page, 422, "no person of this installation has that username or email")
    await page.fill("#invite-login", "lin")
    await page.click("button:text-is('Invite')")
    await page.wait_for_url("**/admin/people")
    assert await page.locator("tr[data-invitation]").count() == 1

    lin = await sign_in_to_choose(chromium, world, "lin")
    assert "not an active member" in await lin.locator("main").inner_text()
    assert await lin.evaluate(A11Y) == []
    await lin.click("button[aria-label='Accept the invitation of acme']")
    await lin.wait_for_url("**/login/choose")
    await lin.click("button:text('Continue')")  # acme, the one tenant offered
    await lin.wait_for_url("**/fleet")
    await lin.context.close()

    await page.reload()
    assert await page.locator("tr[data-invitation]").count() == 0
    assert await page.locator("tr[data-member=lin]").count() == 1
    await page.click(f"tr[data-member='{world.admin}'] button:text('Remove')")
    await refusal(page, 409, "a tenant keeps at least one enabled admin")

    await page.fill("#team-slug", "reviewers")
    await page.click("text=Create team")
    await page.wait_for_url("**/admin/people")
    await page.fill("#team-slug", "reviewers")  # again: the action refuses, the page says so
    await page.click("text=Create team")
    assert await page.locator("#refusal").count() == 1
    await page.click("tr[data-team=reviewers] a")
    await page.wait_for_url("**/admin/teams/*")
    team_url = page.url
    await page.select_option("#team-add", label="Lin (lin)")
    await page.click("button:text('Add to the team')")
    await page.wait_for_url(team_url)
    assert await page.locator("tr[data-team-member=Lin]").count() == 1
    assert await page.evaluate(A11Y) == []
    await page.click("button[aria-label='Remove Lin from the team']")
    await page.wait_for_url(team_url)
    assert await page.locator("tr[data-team-member=Lin]").count() == 0

    await page.click("nav >> text=People")
    await page.select_option("#bind-role", "operator")
    await page.select_option("#bind-subject", label="reviewers")
    await page.select_option("#bind-scope", "selector")
    await page.fill("#bind-selector", "env")
    await page.click("button:text-is('Bind')")
    await refusal(page, 422, "labels are key=value")
    await page.select_option("#bind-role", "operator")
    await page.select_option("#bind-subject", label="reviewers")
    await page.select_option("#bind-scope", "selector")
    await page.fill("#bind-selector", "env=prod, tier=web")
    await page.click("button:text-is('Bind')")
    await page.wait_for_url("**/admin/people")
    scoped = await page.locator("tr[data-binding='operator reviewers']").inner_text()
    assert "selector" in scoped
    assert '"tier":"web"' in scoped.replace(" ", "")
    await page.select_option("#bind-role", "viewer")
    await page.select_option("#bind-subject", label="Lin (lin)")
    await page.select_option("#bind-scope", "owner")
    await page.select_option("#bind-owner", label="platform")
    await page.click("button:text-is('Bind')")
    await page.wait_for_url("**/admin/people")
    assert "owner platform" in await page.locator("tr[data-binding='viewer Lin']").inner_text()
    await page.select_option("#bind-role", "admin")
    await page.select_option("#bind-subject", label="Lin (lin)")
    await page.select_option("#bind-scope", "owner")
    await page.select_option("#bind-owner", label="platform")
    await page.click("button:text-is('Bind')")
    await refusal(page, 422, "admin is bound to the whole tenant only")

    await page.click("button[aria-label='Remove Lin from the tenant']")
    await page.wait_for_url("**/admin/people")
    assert await page.locator("tr[data-member=lin]").count() == 0


async def test_a_rollout_by_hand_and_hosts_pinned_by_labels(signed_in: Any, world: World) -> None:
    page = signed_in
    earlier = await publish(world.services.pool, world.tenant_id, TREE, "by hand, earlier")
    later = {**TREE, "layers/hand.toml": LAYER.replace("cpu", "net")}
    latest = await publish(world.services.pool, world.tenant_id, later, "by hand, latest")
    await page.click("nav >> text=Rollouts")
    await page.select_option("#ro-kind", "telegraf")
    await page.select_option("#ro-revision", str(latest))  # where the release already is
    await page.click("button:text('Start rollout')")
    await refusal(page, 409, "already released at that revision")
    # a revision that is not there (a form from elsewhere): a message, not an error page
    await page.evaluate("document.querySelector('#ro-revision').options[0].value = '99999'")
    await page.select_option("#ro-revision", "99999")
    await page.click("button:text('Start rollout')")
    await refusal(page, 422, "revision")

    await page.select_option("#ro-revision", str(earlier))
    await page.select_option("#ro-policy", "staged")
    await page.click("button:text('Start rollout')")
    await page.wait_for_url("**/rollouts/RO-*")
    assert await page.locator("tr[data-stage=canary]").count() == 1
    await page.click("button:text('Abort')")
    await until_state(page, "aborted")

    await page.click("nav >> text=Rollouts")
    await page.fill("#pin-selector", "prod")
    await page.fill("#pin-hosts-reason", "freeze prod")
    await page.click("button:text('Pin the hosts')")
    await refusal(page, 422, "key=value")
    await page.fill("#pin-selector", "env=prod")
    await page.select_option("#pin-revision", str(earlier))
    await page.fill("#pin-hosts-reason", "freeze prod")
    await page.click("button:text('Pin the hosts')")
    await page.wait_for_url("**/rollouts")
    pinned = page.locator("tr[data-pin='freeze prod']")
    held = await pinned.inner_text()
    assert "telegraf" in held
    assert '"env":"prod"' in held.replace(" ", "")
    assert str(earlier) in held
    await pinned.locator("button:text('Remove pin')").click()
    await page.wait_for_url("**/rollouts")
    assert await pinned.count() == 0


async def test_rebase_conflicts_resolved_in_the_browser_and_a_deleted_file_restored(
    signed_in: Any, world: World
) -> None:
    page, ctx, pool = signed_in, world.admin_ctx, world.services.pool
    cs = await change_sets.create_change_set(ctx, "Per-CPU, again")
    ours = LAYER.replace("percpu = false", "percpu = true")
    await spec.write_file(ctx, cs.id, "layers/base.toml", ours.encode(), seen=cs.digest)
    theirs = {**TREE, "layers/base.toml": LAYER.replace("false", "false\ntotalcpu = true")}
    newer = await publish(pool, world.tenant_id, theirs, "total CPU, meanwhile")
    await page.goto(f"{world.url}/change-sets/{cs.number}")
    await page.click("button:text('Rebase onto the latest revision')")
    conflict = page.locator("fieldset[data-conflict='layers/base.toml']")
    assert "totalcpu = true" in await conflict.inner_text()  # theirs, beside ours
    assert await page.evaluate(A11Y) == []
    await page.check("#edited-0")
    await page.fill("#content-0", "owner = [")  # an edited version the rules refuse
    await page.click("button:text('Go on with these choices')")
    await refusal(page, 422, "")
    assert await page.locator("#content-0").input_value() == "owner = ["  # kept as typed
    both = LAYER.replace("percpu = false", "percpu = true\ntotalcpu = true")
    await page.check("#edited-0")
    await page.fill("#content-0", both)
    await page.click("button:text('Go on with these choices')")
    await page.wait_for_url(f"**/change-sets/{cs.number}")
    assert await page.locator("[data-field=base]").inner_text() == f"revision {newer}"
    diff = await page.locator("pre[data-diff='layers/base.toml']").inner_text()
    assert "+percpu = true" in diff
    assert "totalcpu" not in diff.replace(" totalcpu", "")  # theirs already, not a change
    await page.click("button:text('Close')")
    await page.wait_for_url(f"**/change-sets/{cs.number}")

    extra = LAYER.replace("cpu", "swap")
    kept = await publish(pool, world.tenant_id, {**theirs, "layers/swap.toml": extra}, "swap")
    await publish(pool, world.tenant_id, theirs, "no swap")
    await page.goto(f"{world.url}/spec/files/layers/swap.toml?revision={kept}")
    await page.click("button:text('Restore this version')")
    await page.wait_for_url("**/change-sets/*")
    assert f"Restore r{kept}" in await page.locator("h1").inner_text()
    back = await page.locator("pre[data-diff='layers/swap.toml']").inner_text()
    assert "+[config.inputs.swap.default]" in back
    assert await page.locator("pre[data-diff]").count() == 1  # that file only
    await page.click("button:text('Close')")
    await page.wait_for_url("**/change-sets/*")

    versions = [LAYER.replace("false", v) for v in ("false", "true")]
    await publish(pool, world.tenant_id, {**TREE, "layers/k.toml": versions[0]}, "kernel")
    both = {**TREE, "layers/k.toml": versions[1]}
    undone = await publish(pool, world.tenant_id, both, "kernel per cpu")
    again = versions[1] + "totalcpu = true\n"
    await publish(pool, world.tenant_id, {**TREE, "layers/k.toml": again}, "kernel tags")
    await page.goto(f"{world.url}/spec?revision={undone}")
    await page.click(f"button:text('Revert revision {undone}')")
    await page.locator("fieldset[data-conflict='layers/k.toml']").wait_for()
    assert await page.evaluate(A11Y) == []
    await page.check("#edited-0")
    await page.fill("#content-0", again.replace("percpu = true", "percpu = false"))
    await page.click("button:text('Go on with these choices')")
    await page.wait_for_url("**/change-sets/*")
    assert f"Revert r{undone}" in await page.locator("h1").inner_text()
    reverted = await page.locator("pre[data-diff='layers/k.toml']").inner_text()
    assert "+percpu = false" in reverted
    await page.click("button:text('Close')")
    await page.wait_for_url("**/change-sets/*")


async def test_a_platform_admin_manages_tenants_and_users(chromium: Any, world: World) -> None:
    await Seed(world.services).user("root", platform_admin=True)
    page = await sign_in_to_choose(chromium, world, "root")
    await page.check("#tenant-platform")
    await page.click("button:text('Continue')")
    await page.wait_for_url("**/platform/tenants")
    assert await page.locator("tr[data-tenant=acme]").count() == 1
    assert await page.evaluate(A11Y) == []
    await page.fill("#tenant-slug", "Not A Slug")
    await page.click("button:text('Create tenant')")
    await refusal(page, 422, "a-z, 0-9")
    await page.fill("#tenant-slug", "acme")
    await page.click("button:text('Create tenant')")
    await refusal(page, 409, "")
    await page.fill("#tenant-slug", "umbrella")
    await page.fill("#tenant-name", "Umbrella")
    await page.select_option("#tenant-admin", label="Root (root)")
    await page.click("button:text('Create tenant')")
    await page.wait_for_url("**/platform/tenants")
    state = page.locator("tr[data-tenant=umbrella] [data-field=state]")
    assert await state.inner_text() == "active"
    await page.click("button[aria-label='Suspend umbrella']")
    await page.wait_for_url("**/platform/tenants")
    assert await state.inner_text() == "suspended"
    await page.click("button[aria-label='Resume umbrella']")
    await page.wait_for_url("**/platform/tenants")
    assert await state.inner_text() == "active"
    await page.select_option("#restore-tenant", label="acme")
    await page.select_option("#restore-user", label="Root (root)")
    await page.click("button:text('Make admin')")  # acme gains an admin, audited
    await page.wait_for_url("**/platform/tenants")
    assert await page.locator("#refusal").count() == 0
    await page.click("button[aria-label='Delete umbrella']")
    await page.wait_for_url("**/platform/tenants")
    assert await state.count() == 0 or await state.inner_text() == "deleting"

    await page.click("nav >> text=Users")
    await page.wait_for_url("**/platform/users")
    await page.fill("#user-username", "mia")
    await page.fill("#user-name", "Mia")
    await page.fill("#user-password", "short")
    await page.click("button:text('Create user')")
    await refusal(page, 422, "")
    await page.fill("#user-username", "mia")
    await page.fill("#user-password", PASSWORD)
    await page.click("button:text('Create user')")
    await page.wait_for_url("**/platform/users")
    await page.click("button[aria-label='Disable mia']")
    await page.wait_for_url("**/platform/users")
    assert "disabled" in await page.locator("tr[data-user=mia]").inner_text()
    assert await page.evaluate(A11Y) == []
    await page.click("nav >> text=Platform tokens")
    await page.fill("#token-name", "provisioner")
    await page.click("button:text('Create platform token')")
    shown = await page.locator("input[data-created]").input_value()
    bearer = {"Authorization": f"Bearer {shown}"}
    assert (await world.pool.request("GET", "/api/v1/platform/tenants", bearer)).status == 200
    assert await page.evaluate(A11Y) == []
    await page.goto(f"{world.url}/platform/tokens")
    assert await page.locator("input[data-created]").count() == 0  # shown once only
    await page.click("tr[data-token=provisioner] button:text('Revoke')")
    await page.wait_for_url("**/platform/tokens")
    assert (await world.pool.request("GET", "/api/v1/platform/tenants", bearer)).status == 401
    await page.click("nav >> text=Switch tenant")  # back to a tenant: the tenant pages
    await page.wait_for_url("**/login/choose")
    await page.context.close()
