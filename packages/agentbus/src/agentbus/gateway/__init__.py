"""The gateway service: app, authentication, registration, send path, receipts, reconciler."""
