"""SQL, one module per aggregate, owning its tables.

Functions take a connection, and the tenant id first where the table is tenant data; they hold
SQL and row mapping, no permission checks and no rules. Rows are frozen dataclasses. Callers run
them inside the scope row-level security needs (platformkit.db.scope with strataplane.db.SCOPE).
"""
