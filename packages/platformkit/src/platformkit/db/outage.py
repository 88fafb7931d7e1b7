"""Telling an unreachable database from a statement that failed.

A server that is down, restarting or cut off shows as a connection error (SQLSTATE class 08, or
none when the client lost the connection itself), a shutdown (57P01-57P03), or a pool that found
no connection in time. Everything else (constraint violations, cancelled statements,
serialization failures) is an answer from a working server and stays what it is.
"""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout

_SHUTDOWN = frozenset({"57P01", "57P02", "57P03"})  # admin shutdown, crash shutdown, starting up


def database_unreachable(exc: BaseException) -> bool:
    if isinstance(exc, PoolTimeout):
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        return state is None or state.startswith("08") or state in _SHUTDOWN
    return False
