"""Cedar policies of a tenant: who may address whom, for what, when (docs/agentbus/policies.md)."""
