"""The agent's MCP server (``agentbus mcp serve``): the actions of the sidecar as MCP tools and
the inbox as resources, on the official ``mcp`` SDK, over stdio or streamable HTTP.

tools      the tool functions and the AB- code of a failure as an MCP tool error
loop       keeps the sidecar loop running inside the server while no other process runs it
http       streamable HTTP on loopback behind a bearer token of this agent's own
bench      ``agentbus mcp bench``: tool-call latency through a real MCP client
"""
