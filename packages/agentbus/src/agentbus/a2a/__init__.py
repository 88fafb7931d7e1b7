"""A2A (protocol 1.0, as a2a-sdk 1.3 speaks it): the tenant's agents as A2A agent cards, and the
JSON-RPC methods SendMessage, GetTask and CancelTask mapped onto AgentBus tasks, sent through a
per-workspace bridge agent (docs/decisions/0032, 04-API-SPEC §12)."""
