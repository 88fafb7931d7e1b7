-- Audit export targets (spec/strataplane-schema.md audit_sink): a cursor per sink over the
-- tenant's audit chain; a webhook's Authorization value is a sealed_value (write-only).
SET LOCAL search_path TO strataplane;

CREATE TABLE audit_sink (
    id              uuid        NOT NULL,
    tenant_id       uuid        NOT NULL,
    kind            text        NOT NULL,
    config          jsonb       NOT NULL,
    credential_id   uuid,
    cursor_seq      bigint      NOT NULL,
    last_attempt_at timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, credential_id) REFERENCES sealed_value (tenant_id, id),
    CHECK ((kind = 'webhook') OR (credential_id IS NULL)),
    CHECK (kind IN ('syslog', 'webhook'))
);

SELECT enable_tenant_isolation('audit_sink'::regclass);
