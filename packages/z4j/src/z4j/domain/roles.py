"""Who may do what in a project: roles, permissions and the matrix between them.

Project roles are ordered ``owner > admin > operator > viewer``; a higher role holds every
permission of a lower one. Brain administrators (``users.is_admin``) stand apart from projects:
they create projects, see every project, and act as a project ``admin`` wherever their own
membership does not give them more. Owner-only powers (granting ``owner``) stay with owners.

Pure: no I/O. ``allows`` is the one question every action asks.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def at_least(self, other: Role) -> bool:
        return self.rank >= other.rank


_RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.ADMIN: 2, Role.OWNER: 3}


class Permission(StrEnum):
    PROJECT_READ = "project.read"  # tasks, events, agents, members: everything shown
    TASK_RETRY = "task.retry"
    TASK_CANCEL = "task.cancel"
    QUEUE_MANAGE = "queue.manage"  # purge a queue, rate-limit a task name
    WORKER_MANAGE = "worker.manage"  # grow or shrink a pool, restart a worker
    SCHEDULE_MANAGE = "schedule.manage"  # create, edit, switch, run and delete schedules
    AGENT_MANAGE = "agent.manage"  # create and delete agents (and so see their secrets once)
    MEMBER_MANAGE = "member.manage"
    AUDIT_READ = "audit.read"  # the project's audit log, its export
    RETENTION_MANAGE = "retention.manage"  # how long tasks and events are kept, time zone
    ALERT_MANAGE = "alert.manage"  # alert rules: what is watched and who is told
    PROJECT_MANAGE = "project.manage"  # settings, deletion, granting owner


# The least role that holds each permission; the table in docs/z4j/dashboard.md is this one.
MINIMUM_ROLE: dict[Permission, Role] = {
    Permission.PROJECT_READ: Role.VIEWER,
    Permission.TASK_RETRY: Role.OPERATOR,
    Permission.TASK_CANCEL: Role.OPERATOR,
    Permission.QUEUE_MANAGE: Role.OPERATOR,
    Permission.WORKER_MANAGE: Role.OPERATOR,
    Permission.SCHEDULE_MANAGE: Role.OPERATOR,
    Permission.AGENT_MANAGE: Role.ADMIN,
    Permission.MEMBER_MANAGE: Role.ADMIN,
    Permission.AUDIT_READ: Role.ADMIN,
    Permission.RETENTION_MANAGE: Role.ADMIN,
    Permission.ALERT_MANAGE: Role.ADMIN,
    Permission.PROJECT_MANAGE: Role.OWNER,
}

# What a brain administrator is in a project where membership gives them less (or nothing).
BRAIN_ADMIN_ROLE = Role.ADMIN


def effective_role(membership: Role | None, is_brain_admin: bool) -> Role | None:
    """The role a user acts with in a project; None means the project is invisible to them."""
    if not is_brain_admin:
        return membership
    if membership is None or not membership.at_least(BRAIN_ADMIN_ROLE):
        return BRAIN_ADMIN_ROLE
    return membership


def allows(role: Role | None, permission: Permission) -> bool:
    return role is not None and role.at_least(MINIMUM_ROLE[permission])


def can_create_project(is_brain_admin: bool) -> bool:
    return is_brain_admin


def can_grant(actor: Role | None, granted: Role) -> bool:
    """Whether ``actor`` may give someone ``granted``: managers grant up to their own role, and
    only owners make owners."""
    if actor is None or not allows(actor, Permission.MEMBER_MANAGE):
        return False
    if granted is Role.OWNER:
        return allows(actor, Permission.PROJECT_MANAGE)
    return actor.at_least(granted)
