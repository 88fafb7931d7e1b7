"""How problems appear in OpenAPI: a ``Problem`` schema and ready-made ``responses=`` entries.

``create_app`` documents every 4XX and 5XX answer as ``application/problem+json`` with this
schema (which also stops FastAPI from documenting its own 422 shape, never sent here). A route
may add specific statuses with :func:`problem_responses`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from platformkit.http.problems import PROBLEM_MEDIA_TYPE

__all__ = ["Problem", "problem_responses"]


class Problem(BaseModel):
    """RFC 9457 problem details, with a stable machine code and the request id."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="URI identifying the kind of problem (built from code)")
    title: str = Field(description="Short summary of the kind of problem")
    status: int = Field(description="HTTP status code")
    detail: str | None = Field(default=None, description="What happened in this occurrence")
    code: str = Field(description="Stable machine-readable code, e.g. service_account.in_use")
    instance: str = Field(description="Path of the request that failed")
    request_id: str | None = Field(default=None, description="Id to quote when reporting it")


def problem_responses(*statuses: int | str, description: str = "Problem") -> dict[int | str, Any]:
    """``responses=`` entries documenting ``statuses`` (``404``, ``"4XX"``...) as problems."""
    schema = Problem.model_json_schema()
    entry = {"description": description, "content": {PROBLEM_MEDIA_TYPE: {"schema": schema}}}
    return dict.fromkeys(statuses, entry)
