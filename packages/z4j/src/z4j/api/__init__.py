"""HTTP and WebSocket routes of the brain."""
