"""SQL of the aggregates the gateway's agent paths own: agents and keys, conversations,
messages, receipts. Every function takes the tenant and runs in the caller's tenant scope."""
