"""Rollout pages: the list with the active pins, and one rollout with each stage's progress
and guardrails; pause, resume, advance and abort call the same actions as the API, as do
starting a rollout by hand (an agent kind to a revision, under a policy of that revision or
the default), pinning an agent (from its page) or the hosts a selector matches, and removing a
pin. What the actions refuse (409, 422) is shown on the rollouts page."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from strataplane import errors
from strataplane.actions import history, pins, rollouts
from strataplane.actions.change_sets import RevisionNotFound
from strataplane.actions.pins import KINDS
from strataplane.console.admin import selector_of
from strataplane.console.fleet import agent_id_of
from strataplane.console.render import TAG, refused, render
from strataplane.console.session import Viewer, field, posted, viewer_of

router = APIRouter(include_in_schema=False, tags=[TAG])
VERBS = {
    "pause": rollouts.pause_rollout,
    "resume": rollouts.resume_rollout,
    "advance": rollouts.advance_rollout,
    "abort": rollouts.abort_rollout,
}


POLICIES = "policies/rollout/"


async def _rollouts(request: Request, viewer: Viewer, **extra: Any) -> Response:
    found = await rollouts.list_rollouts(viewer.ctx, limit=100)
    active_pins = await pins.list_pins(viewer.ctx, active_only=True)
    recent = await history.list_revisions(viewer.ctx, limit=50)
    _, tree = await history.revision_tree(viewer.ctx)
    policies = [
        e.path.removeprefix(POLICIES).removesuffix(".toml")
        for e in tree
        if e.path.startswith(POLICIES) and e.path.endswith(".toml")
    ]
    return render(
        request, "rollouts.html", rollouts=found, pins=active_pins, revisions=recent,
        policies=policies, kinds=KINDS, **extra,
    )  # fmt: skip


async def _done_or_shown(request: Request, viewer: Viewer, action: Awaitable[Any]) -> Response:
    try:
        done = await action
    except RevisionNotFound as exc:  # a revision typed or chosen that is not there
        shown = errors.InvalidInput(exc.detail or "no such revision", field="revision")
        return await _rollouts(request, viewer, refusal=shown, status=shown.status)
    except errors.StrataplaneError as exc:
        if not refused(exc):
            raise
        return await _rollouts(request, viewer, refusal=exc, status=exc.status)
    target = "/rollouts"
    if isinstance(done, rollouts.RolloutView):
        target = f"/rollouts/RO-{done.rollout.number}"
    return RedirectResponse(target, status_code=303)


def revision_of(text: str, problem: type[errors.InvalidInput]) -> int:
    """A revision number as posted: a bigint, else ``problem`` (422) naming the field."""
    try:
        number = int(text)
    except ValueError:
        raise problem("a revision number", field="revision") from None
    if not 0 < number < 1 << 63:
        raise problem("no such revision", field="revision")
    return number


@router.get("/rollouts")
async def rollouts_page(request: Request) -> Response:
    return await _rollouts(request, await viewer_of(request))


@router.post("/rollouts")
async def create_rollout(request: Request) -> Response:
    """An operator's rollout: an agent kind to a revision, under the policy chosen (none
    chosen: the revision's default)."""
    viewer, form = await posted(request)
    kind, policy = field(form, "agent_kind", 40), field(form, "policy", 200) or None
    if kind not in KINDS:
        raise errors.InvalidInput(f"agent kinds are {', '.join(KINDS)}", field="agent_kind")
    revision = revision_of(field(form, "revision", 30), errors.InvalidInput)
    created = rollouts.create_rollout(viewer.ctx, kind, revision, policy=policy)
    return await _done_or_shown(request, viewer, created)


@router.post("/pins")
async def pin_hosts(request: Request) -> Response:
    """Hold the hosts a selector matches (of the kinds ticked) at a revision."""
    viewer, form = await posted(request)
    kinds = [k for k in form.getlist("agent_kinds") if isinstance(k, str)][: len(KINDS)]
    try:
        selector = selector_of(field(form, "selector", 4000))
    except errors.InvalidScope as exc:
        shown = errors.PinInvalid(exc.detail or "labels are key=value", field="selector")
        return await _rollouts(request, viewer, refusal=shown, status=shown.status)
    created = pins.create_pin(
        viewer.ctx, revision_id=revision_of(field(form, "revision", 30), errors.PinInvalid),
        reason=field(form, "reason", 2000), selector=selector, agent_kinds=kinds or None,
    )  # fmt: skip
    return await _done_or_shown(request, viewer, created)


@router.get("/rollouts/{ref}")
async def rollout_page(request: Request, ref: str) -> Response:
    viewer = await viewer_of(request)
    view = await rollouts.access_rollout(viewer.ctx, ref[:100])
    return render(request, "rollout.html", view=view)


@router.post("/rollouts/{ref}/{verb}")
async def operate(request: Request, ref: str, verb: str) -> Response:
    viewer, _ = await posted(request)
    action = VERBS.get(verb)
    if action is None:
        raise errors.RolloutNotFound()
    view = await action(viewer.ctx, ref[:100])
    return RedirectResponse(f"/rollouts/RO-{view.rollout.number}", status_code=303)


@router.post("/fleet/agents/{agent_id}/pin")
async def pin_agent(request: Request, agent_id: str) -> Response:
    """Hold one agent at a revision whatever rollouts do, with the reason people will read."""
    viewer, form = await posted(request)
    revision = revision_of(field(form, "revision", 30), errors.PinInvalid)
    found = agent_id_of(agent_id)
    await pins.create_pin(
        viewer.ctx, revision_id=revision, reason=field(form, "reason", 1000), agent_id=found
    )
    return RedirectResponse("/rollouts", status_code=303)


@router.post("/pins/{pin_id}/delete")
async def delete_pin(request: Request, pin_id: str) -> Response:
    viewer, _ = await posted(request)
    try:
        found = UUID(pin_id[:64])
    except ValueError:
        raise errors.PinNotFound() from None
    await pins.delete_pin(viewer.ctx, found)
    return RedirectResponse("/rollouts", status_code=303)
