"""The only write path: named actions that check permission, write, audit, then notify.

Every action takes a ``Ctx`` (who is acting, on which brain) first. Reads that check
permission live here too, as ``access_<noun>(ctx, id)``: they answer NotFound for anything in a
project the caller cannot see, so ids never leak across projects.
"""
