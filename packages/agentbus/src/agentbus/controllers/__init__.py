"""Background loops: find candidates in batches, then act on each, idempotently."""
