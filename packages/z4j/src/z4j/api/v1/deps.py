"""Request-scoped values for routes: the brain, the acting user, and the brain's public URL."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from z4j.actions.api_keys import KeyAuth
from z4j.actions.context import Ctx
from z4j.actions.errors import AuthRequired
from z4j.actions.sessions import Session
from z4j.brain import Brain


def brain_of(request: Request) -> Brain:
    brain: Brain = request.app.state.brain
    return brain


def session_of(request: Request) -> Session | None:
    session: Session | None = getattr(request.state, "session", None)
    return session


def optional_ctx(request: Request) -> Ctx:
    key: KeyAuth | None = getattr(request.state, "api_key", None)
    if key is not None:
        return Ctx(brain_of(request), key.user, key=key.grant)
    session = session_of(request)
    if session is None:
        return Ctx(brain_of(request))
    return Ctx(brain_of(request), session.user, session.session_id)


def require_ctx(request: Request) -> Ctx:
    ctx = optional_ctx(request)
    if ctx.user is None:
        raise AuthRequired()
    return ctx


def public_url(request: Request) -> str:
    """What agents should dial: the configured public URL, else the one this request used."""
    configured = brain_of(request).settings.public_url
    return (configured or str(request.base_url)).rstrip("/")


CtxDep = Annotated[Ctx, Depends(require_ctx)]
OptionalCtxDep = Annotated[Ctx, Depends(optional_ctx)]
