"""Database access: the embedded server, pools, tenant scopes and migrations."""
