"""Harness adapters: ``agentbus install <harness>`` and ``uninstall``, and the hooks a harness
runs (08-HARNESS-ADAPTERS.md).

edits      pure edits of a harness's config document (JSON or TOML): put our entries, take
           exactly them out again
harnesses  per harness, which files hold its MCP servers and hooks, and our entries in them
install    the action: register if needed, apply the edits idempotently, report each file
claude     the Claude Code Stop hook: hand new messages back, or hold the stop for one
usage      usage capture from what each harness reports into usage_local
"""
