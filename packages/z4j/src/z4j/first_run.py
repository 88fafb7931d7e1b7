"""What ``z4j serve`` does before the server starts: migrate and make sure an admin can log in."""

from __future__ import annotations

from rich.console import Console

from z4j.settings import Settings
from z4j.startup import open_brain, prepare


async def first_run(
    settings: Settings, admin_email: str | None, admin_password: str | None, console: Console
) -> str:
    """Return the administrative database URL after migrating and seeding the first admin."""
    from z4j.actions.users import create_first_admin, has_users, setup_token

    prepared = await prepare(
        settings, lambda line: console.print(line, markup=False, soft_wrap=True)
    )
    if prepared.created_secrets:
        console.print(f"created secrets in {settings.config_dir} (mode 0600)")
    brain = await open_brain(prepared, max_size=2)
    try:
        if admin_email and admin_password:
            created = await create_first_admin(brain, admin_email, admin_password)
            if created:
                console.print(f"created admin {admin_email}")
        elif not await has_users(brain):
            console.print(
                "[yellow]No admin yet.[/] Open this one-time setup link to create one: "
                f"{settings.base_url}/setup?token={setup_token(brain)}"
            )
    finally:
        await brain.pool.close()
    return prepared.admin_url
