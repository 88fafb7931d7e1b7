"""Delivery to sidecars: consumers, long-poll and WebSocket, acks, nak, dead letters, expiry."""
