"""The OpenCode plugin ``agentbus install opencode`` writes (a file wholly ours, in OpenCode's
plugin folder): on ``session.idle`` it runs ``agentbus hook opencode idle``, which holds for a
message as the Claude Code Stop hook does, and prompts the session with what comes back; on
``message.updated`` of a finished assistant message it hands the message's tokens and cost to
``agentbus hook opencode usage``."""

from __future__ import annotations

import json

__all__ = ["MARKER", "plugin_source"]

MARKER = (
    "// agentbus: written by `agentbus install opencode`; `agentbus uninstall opencode` removes it"
)

_SOURCE = """MARKER
import { spawn } from "node:child_process"

const AGENTBUS = ARGV

function run(args, input) {
  return new Promise((resolve) => {
    const stdio = ["pipe", "pipe", "inherit"]
    const child = spawn(AGENTBUS[0], [...AGENTBUS.slice(1), ...args], { stdio })
    let out = ""
    child.stdout.on("data", (chunk) => { out += chunk })
    child.on("close", () => resolve(out.trim()))
    child.on("error", () => resolve(""))
    child.stdin.end(JSON.stringify(input))
  })
}

export const AgentBus = async ({ client }) => {
  const waking = new Set()
  return {
    event: async ({ event }) => {
      const props = event.properties || {}
      if (event.type === "message.updated") {
        const info = props.info || {}
        if (info.role === "assistant" && info.time && info.time.completed) {
          await run(["hook", "opencode", "usage"], info)
        }
        return
      }
      if (event.type !== "session.idle" || !props.sessionID || waking.has(props.sessionID)) return
      waking.add(props.sessionID)
      try {
        const idle = ["hook", "opencode", "idle", "--wait", "WAIT"]
        const text = await run(idle, { sessionID: props.sessionID })
        if (text) {
          const body = { parts: [{ type: "text", text }] }
          await client.session.prompt({ path: { id: props.sessionID }, body })
        }
      } finally {
        waking.delete(props.sessionID)
      }
    },
  }
}
"""


def plugin_source(argv: list[str], wait_s: int) -> str:
    """The plugin, starting ``argv`` (the agentbus command with its credentials) for each hook."""
    return (
        _SOURCE.replace("MARKER", MARKER)
        .replace("ARGV", json.dumps(argv))
        .replace("WAIT", str(wait_s))
    )
