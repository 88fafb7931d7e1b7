"""A value a domain rule refuses, with the field it came in: the actions answer it with a 422
that names the field (``InvalidInput.of_field``)."""

from __future__ import annotations


class FieldInvalid(ValueError):
    """``field`` is refused for ``reason`` (a phrase that follows the field's name)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field
        self.reason = reason
