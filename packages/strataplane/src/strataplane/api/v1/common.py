"""Shapes shared by the v1 routes: pages of items and the response of a deleted resource."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field

RoleName = Literal["viewer", "author", "approver", "operator", "secret-admin", "admin"]
PageLimit = Annotated[int, Query(ge=1, le=500, description="Page size.")]


class Model(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Page[T](Model):
    items: list[T]
    next: str | None = Field(None, description="Pass as `after` for the next page.")


def page[T](items: list[T], limit: int, cursor: Any) -> dict[str, Any]:
    """A page whose ``next`` is the cursor of its last item when the page is full."""
    last = cursor(items[-1]) if items and len(items) == limit else None
    return {"items": items, "next": str(last) if last is not None else None}


class OperationOut(Model):
    id: UUID
    tenant_id: UUID | None
    kind: str
    object_id: str
    state: str
    progress: float | None
    result: Any
    error: Any
    created_by: UUID | None
    created_at: datetime
    finished_at: datetime | None
