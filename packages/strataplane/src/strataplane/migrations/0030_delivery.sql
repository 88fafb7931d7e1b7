-- Safe delivery (spec/strataplane-schema.md): the plugin catalog (installation-wide), the
-- validation of rendered artifacts per agent version, rollout stages and assignments, and pins.
SET LOCAL search_path TO strataplane;

CREATE TYPE rollout_stage_state AS ENUM ('pending', 'running', 'passed', 'breached', 'skipped');

CREATE TABLE catalog_bundle (
    id          uuid        NOT NULL,
    agent_kind  agent_kind  NOT NULL,
    version     text        NOT NULL,
    bundle_hash bytea       NOT NULL,
    contents    jsonb       NOT NULL,
    imported_by uuid,
    imported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (agent_kind, version),
    UNIQUE (bundle_hash),
    FOREIGN KEY (imported_by) REFERENCES app_user (id)
);

CREATE TABLE plugin_schema (
    bundle_id uuid  NOT NULL,
    section   text  NOT NULL,
    plugin    text  NOT NULL,
    schema    jsonb NOT NULL,
    sample    text,
    docs_md   text,
    PRIMARY KEY (bundle_id, section, plugin),
    FOREIGN KEY (bundle_id) REFERENCES catalog_bundle (id) ON DELETE CASCADE
);

CREATE TABLE artifact_validation (
    tenant_id     uuid        NOT NULL,
    artifact_hash bytea       NOT NULL,
    agent_version text        NOT NULL,
    level         text        NOT NULL,
    ok            boolean     NOT NULL,
    diagnostics   jsonb       NOT NULL DEFAULT '[]',
    validator     text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, artifact_hash, agent_version, level),
    FOREIGN KEY (tenant_id, artifact_hash) REFERENCES artifact (tenant_id, hash) ON DELETE CASCADE,
    CHECK (level IN ('schema', 'sandbox'))
);

CREATE TABLE rollout_stage (
    tenant_id    uuid                NOT NULL,
    rollout_id   uuid                NOT NULL,
    idx          integer             NOT NULL,
    name         text                NOT NULL,
    selector     jsonb               NOT NULL,
    bake_time    interval            NOT NULL DEFAULT '00:00:00',
    state        rollout_stage_state NOT NULL DEFAULT 'pending',
    agents_total integer,
    guardrails   jsonb,
    started_at   timestamptz,
    finished_at  timestamptz,
    PRIMARY KEY (rollout_id, idx),
    UNIQUE (tenant_id, rollout_id, idx),
    FOREIGN KEY (tenant_id, rollout_id) REFERENCES rollout (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE rollout_assignment (
    tenant_id         uuid         NOT NULL,
    rollout_id        uuid         NOT NULL,
    agent_instance_id uuid         NOT NULL,
    stage_idx         integer      NOT NULL,
    assigned_at       timestamptz  NOT NULL DEFAULT now(),
    baseline_health   agent_health,
    PRIMARY KEY (rollout_id, agent_instance_id),
    FOREIGN KEY (tenant_id, agent_instance_id) REFERENCES agent_instance (tenant_id, id)
        ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, rollout_id, stage_idx) REFERENCES rollout_stage (tenant_id, rollout_id, idx)
        ON DELETE CASCADE
);

CREATE TABLE pin (
    id                uuid         NOT NULL,
    tenant_id         uuid         NOT NULL,
    selector          jsonb,
    agent_kinds       agent_kind[],
    agent_instance_id uuid,
    revision_id       bigint       NOT NULL,
    reason            text         NOT NULL,
    created_by        uuid,
    created_at        timestamptz  NOT NULL DEFAULT now(),
    starts_at         timestamptz  NOT NULL DEFAULT now(),
    expires_at        timestamptz,
    PRIMARY KEY (id),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, agent_instance_id) REFERENCES agent_instance (tenant_id, id)
        ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, revision_id) REFERENCES spec_revision (tenant_id, id),
    CHECK ((selector IS NULL) <> (agent_instance_id IS NULL)),
    CHECK ((selector IS NULL) = (agent_kinds IS NULL)),
    CHECK (expires_at > starts_at)
);

SELECT enable_tenant_isolation(t::regclass)
FROM unnest(ARRAY['artifact_validation', 'rollout_stage', 'rollout_assignment', 'pin']) AS t;
