"""FastAPI glue: the claiming dependency, and the marker for routes that return a credential.

Not using postponed annotations on purpose: FastAPI reads these signatures at route
definition, and the closure's ``principal`` must be a real object there, not a string.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

from fastapi import Depends, Header
from starlette.requests import Request

from platformkit.http.idempotency.errors import IdempotencyKeyNotAccepted
from platformkit.http.idempotency.keys import HEADER

if TYPE_CHECKING:
    from platformkit.http.idempotency.component import Idempotency

__all__ = ["claim_dependency", "no_idempotency_key"]

_DOC = (
    "Makes a retry of this request safe: a repeat with the same key within 24 h returns the "
    "first response (header Idempotent-Replayed: true) instead of running again."
)


def claim_dependency(
    component: "Idempotency",
    principal: Callable[..., Any],
    ids: Callable[[Any], tuple[UUID, UUID | None]],
) -> Callable[..., Any]:
    async def claim_idempotency_key(
        request: Request,
        who: Annotated[Any, Depends(principal)],
        key: Annotated[str | None, Header(alias=HEADER, description=_DOC)] = None,
    ) -> None:
        principal_id, tenant_id = ids(who)
        await component.claim(request, principal_id=principal_id, tenant_id=tenant_id)

    return claim_idempotency_key


async def no_idempotency_key(request: Request) -> None:
    """Mark a route that returns a credential: it refuses a key, so no stored response (which a
    replay would hand to whoever repeats the key) ever holds a credential."""
    if HEADER in request.headers:
        raise IdempotencyKeyNotAccepted(
            "this request returns a credential and cannot be made idempotent; "
            "retry it without the key"
        )
