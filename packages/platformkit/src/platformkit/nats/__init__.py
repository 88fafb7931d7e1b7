"""NATS JetStream: the embedded server used when no NATS URL is configured."""
