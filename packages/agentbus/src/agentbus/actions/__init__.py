"""The only write path: ``verb_noun(ctx, ...)`` opens the transaction, checks permission, writes,
and appends the ``audit_actions`` row. The admin CLI, the API and the console call these."""
