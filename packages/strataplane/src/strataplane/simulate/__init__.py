"""Simulated agents and fleet seeding for tests and benchmarks (not used by the server)."""
