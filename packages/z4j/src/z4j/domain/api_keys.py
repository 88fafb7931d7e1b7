"""The role an API key acts with: its own, never more than its owner holds at that moment.

Pure: no I/O. A key whose owner has lost the project (``owner`` None) acts with nothing.
"""

from __future__ import annotations

from z4j.domain.roles import Role


def grantable(owner: Role | None, wanted: Role) -> bool:
    """Whether a user acting with ``owner`` in a project may make a key with ``wanted``."""
    return owner is not None and owner.at_least(wanted)


def acting_role(key: Role, owner: Role | None) -> Role | None:
    """The lower of the key's role and its owner's current one."""
    if owner is None:
        return None
    return key if owner.at_least(key) else owner
