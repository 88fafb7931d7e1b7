"""Background loops, split into find and act, run per controller shard by its leader."""
