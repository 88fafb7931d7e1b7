"""Background loops of the brain."""
