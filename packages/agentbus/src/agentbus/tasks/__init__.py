"""Tasks: requests idempotent per recipient, the state machine and its transitions."""
