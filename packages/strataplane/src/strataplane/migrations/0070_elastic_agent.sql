-- Elastic Agent through the Fleet Server protocol (docs/strataplane/agents/elastic-agent.md):
-- component and unit state from check-ins, and the per-agent action queue. Tables as
-- spec/strataplane-schema.md writes them.
SET LOCAL search_path TO strataplane;

CREATE TABLE agent_component (
    tenant_id         uuid        NOT NULL,
    agent_instance_id uuid        NOT NULL,
    component_id      text        NOT NULL,
    unit_id           text        NOT NULL DEFAULT '',
    unit_type         text,
    state             text        NOT NULL,
    message           text,
    payload           jsonb,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_instance_id, component_id, unit_id),
    FOREIGN KEY (tenant_id, agent_instance_id) REFERENCES agent_instance (tenant_id, id)
        ON DELETE CASCADE
);

CREATE TABLE agent_action (
    id                uuid        NOT NULL,
    tenant_id         uuid        NOT NULL,
    agent_instance_id uuid        NOT NULL,
    type              text        NOT NULL,
    data              jsonb       NOT NULL DEFAULT '{}'::jsonb,
    artifact          bytea,
    policy_seq        bigint,
    created_by        uuid,
    created_at        timestamptz NOT NULL DEFAULT now(),
    start_time        timestamptz,
    expires_at        timestamptz,
    delivered_at      timestamptz,
    delivery_count    integer     NOT NULL DEFAULT 0,
    acked_at          timestamptz,
    ack_error         text,
    superseded_by     uuid,
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id, agent_instance_id) REFERENCES agent_instance (tenant_id, id)
        ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, artifact) REFERENCES artifact (tenant_id, hash),
    FOREIGN KEY (tenant_id, superseded_by) REFERENCES agent_action (tenant_id, id),
    CHECK (type IN ('POLICY_CHANGE', 'UNENROLL', 'SETTINGS'))
);

CREATE INDEX agent_action_pending ON agent_action USING btree (agent_instance_id, created_at)
    WHERE acked_at IS NULL AND superseded_by IS NULL;

SELECT enable_tenant_isolation('agent_component'::regclass);
SELECT enable_tenant_isolation('agent_action'::regclass);
