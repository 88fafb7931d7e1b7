"""Time-based one-time codes (RFC 6238 through pyotp) and recovery codes: pure rules.

A code is accepted for the current 30-second step or one step either side (clock drift), and
only for a step newer than the last one accepted, so a code seen once cannot be replayed.
Recovery codes are ten characters of lowercase base32 shown as ``xxxxx-xxxxx``; typing is
forgiving (case, spaces and dashes do not matter).
"""

from __future__ import annotations

import hmac
import secrets

import pyotp

STEP_SECONDS = 30
DRIFT_STEPS = 1
ISSUER = "z4j"
RECOVERY_CODES = 10
_RECOVERY_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"


def new_secret() -> str:
    return pyotp.random_base32()


def provisioning_uri(secret: str, email: str) -> str:
    return pyotp.TOTP(secret).provisioning_uri(name=email, issuer_name=ISSUER)


def code_at(secret: str, step: int) -> str:
    return pyotp.TOTP(secret).at(step * STEP_SECONDS)


def looks_like_code(text: str) -> bool:
    return len(text) == 6 and text.isascii() and text.isdigit()


def accepted_step(secret: str, code: str, now: float, last_step: int | None) -> int | None:
    """The step ``code`` is valid for (around ``now``, newer than ``last_step``), else None."""
    code = code.strip().replace(" ", "")
    if not looks_like_code(code):
        return None
    current = int(now // STEP_SECONDS)
    found = None
    for step in range(current - DRIFT_STEPS, current + DRIFT_STEPS + 1):
        same = hmac.compare_digest(code_at(secret, step).encode(), code.encode())
        if same and (last_step is None or step > last_step):
            found = step
    return found


def new_recovery_codes(count: int = RECOVERY_CODES) -> list[str]:
    codes = []
    for _ in range(count):
        raw = "".join(secrets.choice(_RECOVERY_ALPHABET) for _ in range(10))
        codes.append(f"{raw[:5]}-{raw[5:]}")
    return codes


def normalize_recovery(text: str) -> str | None:
    """The code as stored (ten base32 characters), or None when it cannot be one."""
    folded = text.strip().lower().replace("-", "").replace(" ", "")
    if len(folded) != 10 or not set(folded) <= set(_RECOVERY_ALPHABET):
        return None
    return folded
