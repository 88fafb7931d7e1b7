"""AgentBus gateway: API, delivery over NATS JetStream, admin CLI."""
