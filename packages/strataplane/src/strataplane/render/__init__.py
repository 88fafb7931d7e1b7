"""Rendering (docs/strataplane/fleet-internals.md): an agent's composition at its desired
revision into the bytes it runs, stored as zstd-compressed content-addressed artifacts, with a
cache keyed by the render inputs so that agents with equal inputs share one render."""
