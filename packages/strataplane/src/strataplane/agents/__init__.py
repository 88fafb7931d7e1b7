"""Agent-facing endpoints: plain Starlette routes on the hot paths (config polls, heartbeats),
with cached credential lookups and batched writes (docs/strataplane/agents/telegraf.md)."""
