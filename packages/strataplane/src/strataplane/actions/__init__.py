"""The only write path: ``verb_noun(ctx, ...)`` opens the transaction, checks permission,
writes through store/, appends the audit event as its last write, and schedules side effects
after commit. HTTP, CLI and jobs call the same functions."""
