"""Named actions: the one write path the CLI, the MCP server and the adapters call.

setup      init_credentials, login, register_agent
sending    send_message, reply_message, ack_messages, and the queue-then-try send step
tasks      request_task, update_task (accept, reject, progress, complete, fail, cancel)
tracing    trace_message (the local half and the gateway's timeline)
"""
