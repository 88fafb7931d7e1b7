"""Bodies of the account routes: passwords, API keys, users, two-factor sign-in, audit."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from z4j.domain.roles import Role


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class ResetRequestIn(BaseModel):
    email: str = Field(max_length=320)


class Accepted(BaseModel):
    detail: str


class ResetIn(BaseModel):
    token: str = Field(max_length=200, description="The token of the mailed reset link.")
    password: str = Field(max_length=1024, description="The new password.")


class PasswordChangeIn(BaseModel):
    current_password: str = Field(max_length=1024)
    new_password: str = Field(max_length=1024)


class ApiKeyIn(BaseModel):
    project_id: uuid.UUID
    name: str = Field(min_length=1, max_length=200)
    role: Role = Field(description="At most the caller's role in the project.")


class ApiKeyOut(_Out):
    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    role: Role = Field(description="Capped at the owner's current role whenever it is used.")
    prefix: str = Field(description="The key's public start, to recognise it.")
    last_used_at: datetime | None
    revoked_at: datetime | None
    created_at: datetime


class ApiKeyCreated(BaseModel):
    key: ApiKeyOut
    token: str = Field(description="Shown once; send it as `Authorization: Bearer <token>`.")


class AuditEntryOut(_Out):
    id: uuid.UUID
    ts: datetime
    actor_user_id: uuid.UUID | None
    actor_email: str | None
    project_id: uuid.UUID | None
    action: str
    target_type: str | None
    target_id: uuid.UUID | None
    details: dict[str, Any]
    row_hmac: str
    prev_row_hmac: str | None


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_before: uuid.UUID | None = Field(description="Older rows: pass as before.")


class AuditCheckOut(BaseModel):
    ok: bool
    checked: int = Field(description="Rows verified before the first broken one (or all).")
    bad_id: uuid.UUID | None
    reason: str | None = Field(description="hash_mismatch or prev_link_broken")
    detail: str


class AccountOut(_Out):
    id: uuid.UUID
    email: str
    display_name: str | None
    is_active: bool
    is_admin: bool
    projects: int = Field(description="Projects the account is a member of.")
    created_at: datetime


class LoginOut(_Out):
    id: uuid.UUID
    email: str
    display_name: str | None
    is_admin: bool
    mfa_required: bool = Field(
        False,
        description="The password was right; finish with POST /auth/login/mfa within 5 minutes "
        "(the cookie set now only allows that).",
    )


class CodeIn(BaseModel):
    code: str = Field(max_length=64, description="A 6-digit code from the app, or a recovery code.")


class MfaStatusOut(BaseModel):
    enabled: bool
    pending: bool = Field(description="Enrolment started, not confirmed yet.")
    recovery_left: int


class MfaEnrolmentOut(BaseModel):
    secret: str = Field(description="The TOTP secret (base32), for typing into an app.")
    otpauth_uri: str = Field(description="The same as an otpauth:// URI.")


class RecoveryCodesOut(BaseModel):
    recovery_codes: list[str] = Field(description="Shown once; each works once.")


class RequireMfaIn(BaseModel):
    required: bool
