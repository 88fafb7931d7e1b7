"""Benchmarks of the brain: commands that print one JSON object per line."""
