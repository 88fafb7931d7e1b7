-- The tenant audit chain of data model §2.5, kept in PostgreSQL (decision 0048): one hash chain
-- per tenant over every audit_actions row of that tenant, with Ed25519-signed checkpoint rows.
--
-- Column names are the model's; types are the nearest PostgreSQL ones (UInt64 -> bigint,
-- DateTime64 -> timestamptz, FixedString(32) -> bytea of 32 bytes, Nullable(String) -> bytea).
-- Additions: event_digest (SHA-256 of the audit_actions row the chain row stands for, so an
-- edit of that row shows as well) and signing_kid (which signing key signed a checkpoint).
CREATE TABLE audit_chain (
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    seq             bigint NOT NULL CHECK (seq >= 1),
    at              timestamptz NOT NULL,
    event_id        uuid NOT NULL,
    event_kind      text NOT NULL CHECK (event_kind IN ('message_event', 'audit_action', 'checkpoint')),
    actor           text NOT NULL,
    summary         text NOT NULL,
    prev_hash       bytea NOT NULL CHECK (length(prev_hash) = 32),
    row_hash        bytea NOT NULL CHECK (length(row_hash) = 32),
    signature       bytea,
    event_digest    bytea CHECK (length(event_digest) = 32),          -- addition
    signing_kid     text,                                             -- addition
    PRIMARY KEY (tenant_id, seq),
    CHECK ((event_kind = 'checkpoint') = (signature IS NOT NULL AND signing_kid IS NOT NULL))
);

-- Addition: the head of each tenant's chain. Its row lock serialises appends (two writers never
-- link to the same predecessor); verification compares it with the last row, so deleting the
-- newest rows shows. published_seq is how far the chain went out on sys.audit.>.
CREATE TABLE audit_heads (
    tenant_id       uuid PRIMARY KEY REFERENCES tenants(id),
    seq             bigint NOT NULL DEFAULT 0,
    row_hash        bytea NOT NULL,
    checkpoint_seq  bigint NOT NULL DEFAULT 0,
    checkpoint_at   timestamptz,
    published_seq   bigint NOT NULL DEFAULT 0
);

DO $rls$
DECLARE
    t text;
    consent text;
BEGIN
    FOREACH t IN ARRAY ARRAY['audit_chain', 'audit_heads'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        consent := format(
            'EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = %I.tenant_id'
            ' AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL)', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_tenant_id())'
            ' WITH CHECK (tenant_id = current_tenant_id())', t);
        EXECUTE format('CREATE POLICY support_read ON %I FOR SELECT TO agentbus_support USING (%s)',
                       t, consent);
        EXECUTE format('CREATE POLICY support_consent_required ON %I AS RESTRICTIVE'
                       ' TO agentbus_support USING (%s)', t, consent);
    END LOOP;
END
$rls$;

-- Append-only for the gateway: it adds chain rows and moves heads, never rewrites a row. The
-- support role writes its own audit actions, so it links them into the chain as well.
GRANT SELECT, INSERT ON audit_chain TO agentbus_app;
GRANT SELECT, INSERT, UPDATE ON audit_heads TO agentbus_app;
REVOKE UPDATE, DELETE, TRUNCATE ON audit_chain FROM agentbus_app;
GRANT SELECT, INSERT ON audit_chain TO agentbus_support;
GRANT SELECT, INSERT, UPDATE ON audit_heads TO agentbus_support;
-- Chains of every tenant with work for the audit job (checkpoints, publishing); the job runs as
-- agentbus_app, which sees one tenant at a time.
CREATE FUNCTION audit_heads_pending()
RETURNS TABLE (tenant_id uuid, seq bigint, checkpoint_seq bigint, checkpoint_at timestamptz,
               published_seq bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    PERFORM set_config('agentbus.lookup', 'on', true);
    RETURN QUERY SELECT h.tenant_id, h.seq, h.checkpoint_seq, h.checkpoint_at, h.published_seq
                   FROM audit_heads h
                  WHERE h.seq > h.checkpoint_seq OR h.seq > h.published_seq
                  ORDER BY h.tenant_id;
    PERFORM set_config('agentbus.lookup', 'off', true);
END
$$;
CREATE POLICY platform_lookup ON audit_heads FOR SELECT TO agentbus_owner
    USING (current_setting('agentbus.lookup', true) = 'on');
REVOKE ALL ON FUNCTION audit_heads_pending() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_heads_pending() TO agentbus_app;
