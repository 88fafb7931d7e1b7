"""Turning agents' event batches into ``events`` and ``tasks`` rows."""
