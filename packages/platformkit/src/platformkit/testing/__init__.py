"""pytest fixtures for real services: embedded PostgreSQL, NATS JetStream and Chromium."""
