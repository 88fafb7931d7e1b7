"""Pure rules of the gateway: wire forms, AB codes, envelope parsing and signature checks, the
type registry and its data schemas (``schemas/*.json``), limit arithmetic, key proofs, page
cursors and the agent spec. Nothing here touches the database, NATS or the object store."""
