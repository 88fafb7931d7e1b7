-- The HTTP kernel's test copy of strataplane's idempotency_key: the same columns, constraints
-- and index, in a schema of its own (so the component's qualified table name is exercised),
-- with the forced tenant_isolation policy the kernel's other test tables use.
CREATE SCHEMA httpkit;

CREATE TABLE httpkit.idempotency_key (
    principal_id     uuid        NOT NULL,
    key              text        NOT NULL,
    tenant_id        uuid,
    request_hash     bytea       NOT NULL,
    response_status  integer     NOT NULL,
    response_body    bytea       NOT NULL,
    response_headers jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (principal_id, tenant_id, key),
    CHECK (length(key) <= 255)
);

CREATE INDEX idempotency_key_created ON httpkit.idempotency_key USING btree (created_at);

ALTER TABLE httpkit.idempotency_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE httpkit.idempotency_key FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON httpkit.idempotency_key
    USING (tenant_id = NULLIF(current_setting('kit.tenant', true), '')::uuid
           OR current_setting('kit.scope', true) = 'platform')
    WITH CHECK (tenant_id = NULLIF(current_setting('kit.tenant', true), '')::uuid
                OR current_setting('kit.scope', true) = 'platform');
