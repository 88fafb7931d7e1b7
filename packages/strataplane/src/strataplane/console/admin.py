"""Admin pages of a tenant: people (members, a new local member with an optional tenant-wide
role, invitations of people of the installation by username or email, removing a member,
teams with their OIDC group mappings and their members, role bindings over the tenant, a
team's objects or a selector's hosts) and credentials (the viewer's API tokens, enrolment
tokens). A new token's plaintext is shown once, on the page that answers its creation (never
stored, never cached). What an action refuses (409, 422) is shown on the form's page."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from strataplane import errors
from strataplane.actions import bindings, fleet_enrollment, invitations, members, teams, tokens
from strataplane.actions.fleet_errors import EnrollmentTokenNotFound
from strataplane.api.v1.fleet_inventory import parse_labels
from strataplane.authz import ROLES, SCOPE_KINDS
from strataplane.console.render import TAG, refused, render
from strataplane.console.session import Viewer, field, posted, viewer_of

router = APIRouter(include_in_schema=False, tags=[TAG])


def uuid_of(text: str, missing: type[errors.NotFound]) -> UUID:
    try:
        return UUID(text[:64])
    except ValueError:
        raise missing() from None


async def _people(request: Request, viewer: Viewer, **extra: Any) -> Response:
    found_members = await members.list_members(viewer.ctx, limit=500)
    found_teams = await teams.list_teams(viewer.ctx, limit=500)
    names = {m.user_id: m.display_name for m in found_members}
    names.update({t.id: t.slug for t in found_teams})
    return render(
        request, "admin_people.html", members=found_members, teams=found_teams, names=names,
        bindings=await bindings.list_role_bindings(viewer.ctx, limit=500), roles=ROLES,
        invitations=await invitations.list_invitations(viewer.ctx, limit=500),
        scopes=SCOPE_KINDS, **extra,
    )  # fmt: skip


async def done_or_shown(
    request: Request, viewer: Viewer, action: Awaitable[Any], back: str = "/admin/people"
) -> Response:
    """Back to the page once the action ran; what it refused, on the people page (or the
    team's page) with its message."""
    try:
        await action
    except errors.StrataplaneError as exc:
        if not refused(exc):
            raise
        if back.startswith("/admin/teams/"):
            return await _team(request, viewer, UUID(back.rsplit("/", 1)[1]), refusal=exc)
        return await _people(request, viewer, refusal=exc, status=exc.status)
    return RedirectResponse(back, status_code=303)


@router.get("/admin/people")
async def people_page(request: Request) -> Response:
    return await _people(request, await viewer_of(request))


@router.post("/admin/invitations")
async def invite(request: Request) -> Response:
    """An existing person of the installation, by username or email: they become a member when
    they accept (on their tenant chooser), as through the API."""
    viewer, form = await posted(request)
    login = field(form, "login", 320)
    return await done_or_shown(request, viewer, invitations.invite_by_login(viewer.ctx, login))


@router.post("/admin/invitations/{invitation_id}/revoke")
async def revoke_invitation(request: Request, invitation_id: str) -> Response:
    viewer, _ = await posted(request)
    found = uuid_of(invitation_id, errors.InvitationNotFound)
    await invitations.revoke_invitation(viewer.ctx, found)
    return RedirectResponse("/admin/people", status_code=303)


@router.post("/admin/members/{user_id}/remove")
async def remove_member(request: Request, user_id: str) -> Response:
    """The tenant's last enabled admin is kept: the action refuses, the page says why."""
    viewer, _ = await posted(request)
    found = uuid_of(user_id, errors.MemberNotFound)
    return await done_or_shown(request, viewer, members.remove_member(viewer.ctx, found))


async def _team(request: Request, viewer: Viewer, team_id: UUID, **extra: Any) -> Response:
    team = await teams.access_team(viewer.ctx, team_id)
    inside = await teams.list_team_members(viewer.ctx, team_id)
    ids = {m.user_id for m in inside}
    others = [
        m
        for m in await members.list_members(viewer.ctx, limit=500)
        if m.kind == "human" and m.user_id not in ids
    ]
    refusal = extra.get("refusal")
    status = refusal.status if isinstance(refusal, errors.StrataplaneError) else 200
    return render(
        request, "admin_team.html", team=team, inside=inside, others=others, status=status, **extra
    )


@router.get("/admin/teams/{team_id}")
async def team_page(request: Request, team_id: str) -> Response:
    viewer = await viewer_of(request)
    return await _team(request, viewer, uuid_of(team_id, errors.TeamNotFound))


@router.post("/admin/teams/{team_id}/members")
async def add_team_member(request: Request, team_id: str) -> Response:
    viewer, form = await posted(request)
    team = uuid_of(team_id, errors.TeamNotFound)
    await teams.access_team(viewer.ctx, team)  # another tenant's team: 404
    user = uuid_of(field(form, "user_id", 64), errors.MemberNotFound)
    added = teams.add_team_member(viewer.ctx, team, user)
    return await done_or_shown(request, viewer, added, f"/admin/teams/{team}")


@router.post("/admin/teams/{team_id}/members/{user_id}/remove")
async def remove_team_member(request: Request, team_id: str, user_id: str) -> Response:
    viewer, _ = await posted(request)
    team = uuid_of(team_id, errors.TeamNotFound)
    await teams.access_team(viewer.ctx, team)
    user = uuid_of(user_id, errors.TeamMemberNotFound)
    removed = teams.remove_team_member(viewer.ctx, team, user)
    return await done_or_shown(request, viewer, removed, f"/admin/teams/{team}")


@router.post("/admin/teams")
async def create_team(request: Request) -> Response:
    viewer, form = await posted(request)
    group = field(form, "external_id", 256).strip() or None
    slug, name = field(form, "slug", 63).strip(), field(form, "display_name", 200).strip()
    created = teams.create_team(viewer.ctx, slug, name or slug, external_id=group)
    return await done_or_shown(request, viewer, created)


@router.post("/admin/members")
async def add_member(request: Request) -> Response:
    """A new local user made a member (the API's ``add_member``), then given the chosen role
    tenant-wide; an existing user joins by invitation (the API)."""
    viewer, form = await posted(request)
    username, role = field(form, "username", 200).strip(), field(form, "role", 40)
    if role and role not in ROLES:  # before the member exists, so a bad role adds nobody
        raise errors.InvalidInput("choose one of the roles offered", field="role")
    password = field(form, "password", 1024)
    display_name = field(form, "display_name", 200).strip() or None
    email = field(form, "email", 320).strip() or None

    async def add() -> None:
        member = await members.add_member(
            viewer.ctx, username=username, password=password, display_name=display_name,
            email=email,
        )  # fmt: skip
        if role:
            await bindings.create_role_binding(viewer.ctx, role=role, user_id=member.user_id)

    return await done_or_shown(request, viewer, add())


@router.post("/admin/members/{user_id}/{state}")
async def member_state(request: Request, user_id: str, state: str) -> Response:
    viewer, _ = await posted(request)
    if state not in ("disable", "enable"):
        raise errors.MemberNotFound()
    found = uuid_of(user_id, errors.MemberNotFound)
    await members.set_member_disabled(viewer.ctx, found, state == "disable")
    return RedirectResponse("/admin/people", status_code=303)


async def _credentials(request: Request, viewer: Viewer, **extra: Any) -> Response:
    return render(
        request, "admin_tokens.html",
        tokens=await tokens.list_tokens(viewer.ctx),
        enrollment=await fleet_enrollment.list_enrollment_tokens(viewer.ctx), **extra,
    )  # fmt: skip


@router.get("/admin/tokens")
async def tokens_page(request: Request) -> Response:
    return await _credentials(request, await viewer_of(request))


@router.post("/admin/tokens")
async def create_token(request: Request) -> Response:
    viewer, form = await posted(request)
    created = await tokens.create_token(viewer.ctx, field(form, "name", 200).strip() or "console")
    return await _credentials(request, viewer, created=created.plaintext, created_name="API token")


@router.post("/admin/tokens/{token_id}/revoke")
async def revoke_token(request: Request, token_id: str) -> Response:
    viewer, _ = await posted(request)
    await tokens.revoke_token(viewer.ctx, uuid_of(token_id, errors.TokenNotFound))
    return RedirectResponse("/admin/tokens", status_code=303)


@router.post("/admin/enrollment-tokens")
async def create_enrollment_token(request: Request) -> Response:
    viewer, form = await posted(request)
    items = [p.strip() for p in field(form, "labels", 4000).split(",") if p.strip()]
    created = await fleet_enrollment.create_enrollment_token(
        viewer.ctx, field(form, "name", 200).strip() or "console",
        agent_kind=field(form, "agent_kind", 40) or "telegraf", labels=parse_labels(items[:50]),
    )  # fmt: skip
    return await _credentials(
        request, viewer, created=created.plaintext, created_name="Enrolment token"
    )


@router.post("/admin/enrollment-tokens/{token_id}/revoke")
async def revoke_enrollment_token(request: Request, token_id: str) -> Response:
    viewer, _ = await posted(request)
    found = uuid_of(token_id, EnrollmentTokenNotFound)
    await fleet_enrollment.revoke_enrollment_token(viewer.ctx, found)
    return RedirectResponse("/admin/tokens", status_code=303)


def selector_of(text: str) -> dict[str, Any]:
    """``key=value`` pairs, comma separated, as the selector's matchLabels."""
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise errors.InvalidScope("give the hosts' labels, key=value", field="scope_selector")
    try:
        return {"matchLabels": parse_labels(items[:50])}
    except errors.InvalidInput:
        raise errors.InvalidScope("labels are key=value", field="scope_selector") from None


@router.post("/admin/role-bindings")
async def create_binding(request: Request) -> Response:
    """A role for a member or a team, over the tenant, a team's objects (owner) or the hosts
    a selector matches."""
    viewer, form = await posted(request)
    subject = field(form, "subject", 80)  # "user:<id>" or "team:<id>"
    kind, _, raw = subject.partition(":")
    if kind not in ("user", "team"):
        raise errors.InvalidScope("choose a member or a team", field="subject")
    found = uuid_of(raw, errors.MemberNotFound if kind == "user" else errors.TeamNotFound)
    scope = field(form, "scope_kind", 20) or "tenant"
    owner = field(form, "scope_team", 64)
    try:
        scope_team = uuid_of(owner, errors.TeamNotFound) if scope == "owner" else None
        selector = selector_of(field(form, "scope_selector", 4000)) if scope == "selector" else None
    except errors.InvalidScope as exc:
        return await _people(request, viewer, refusal=exc, status=exc.status)
    created = bindings.create_role_binding(
        viewer.ctx, role=field(form, "role", 40),
        user_id=found if kind == "user" else None, team_id=found if kind == "team" else None,
        scope_kind=scope, scope_team_id=scope_team, scope_selector=selector,
    )  # fmt: skip
    return await done_or_shown(request, viewer, created)


@router.post("/admin/role-bindings/{binding_id}/delete")
async def delete_binding(request: Request, binding_id: str) -> Response:
    viewer, _ = await posted(request)
    await bindings.delete_role_binding(viewer.ctx, uuid_of(binding_id, errors.RoleBindingNotFound))
    return RedirectResponse("/admin/people", status_code=303)
