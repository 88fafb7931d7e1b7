-- Agents and what they run (spec/strataplane-schema.md): artifacts, agent instances and their
-- credentials, status transitions and logs, and Telegraf class mode's per-class rows.
SET LOCAL search_path TO strataplane;

CREATE TABLE artifact (
    tenant_id    uuid        NOT NULL,
    hash         bytea       NOT NULL,
    agent_kind   agent_kind  NOT NULL,
    content      bytea       NOT NULL,
    secret_refs  text[]      NOT NULL DEFAULT '{}',
    size         integer     NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, hash),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE agent_instance (
    id                   uuid         NOT NULL,
    tenant_id            uuid         NOT NULL,
    host_id              uuid         NOT NULL,
    kind                 agent_kind   NOT NULL,
    external_id          text         NOT NULL,
    version              text,
    version_raw          text,
    enrollment_token_id  uuid,
    enrolled_at          timestamptz  NOT NULL DEFAULT now(),
    approved_at          timestamptz,
    identity_subject     text,
    identity_fingerprint bytea,
    identity_anchor_id   uuid,
    identity_not_after   timestamptz,
    replace_token_hash   bytea,
    assurance            assurance GENERATED ALWAYS AS (
        CASE WHEN identity_fingerprint IS NULL THEN 'low'::assurance ELSE 'high'::assurance END
    ) STORED,
    health               agent_health NOT NULL DEFAULT 'pending',
    health_message       text,
    sync                 agent_sync   NOT NULL DEFAULT 'updating',
    sync_reason          text,
    flags                text[]       NOT NULL DEFAULT '{}',
    quarantined_at       timestamptz,
    quarantine_reason    text,
    desired_revision_id  bigint,
    desired_artifact     bytea,
    desired_since        timestamptz,
    served_artifact      bytea,
    served_at            timestamptz,
    applied_revision_id  bigint,
    applied_artifact     bytea,
    applied_at           timestamptz,
    last_seen_at         timestamptz,
    last_source_ip       inet,
    facts                jsonb        NOT NULL DEFAULT '{}',
    created_at           timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, kind, external_id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, applied_artifact) REFERENCES artifact (tenant_id, hash),
    FOREIGN KEY (tenant_id, applied_revision_id) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, desired_artifact) REFERENCES artifact (tenant_id, hash),
    FOREIGN KEY (tenant_id, desired_revision_id) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, enrollment_token_id) REFERENCES enrollment_token (tenant_id, id),
    FOREIGN KEY (tenant_id, host_id) REFERENCES host (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, identity_anchor_id) REFERENCES trust_anchor (tenant_id, id),
    FOREIGN KEY (tenant_id, served_artifact) REFERENCES artifact (tenant_id, hash),
    CHECK ((quarantined_at IS NULL) = (quarantine_reason IS NULL)),
    CHECK (sync_reason IS NULL OR sync = 'out_of_sync'),
    CHECK (flags <@ ARRAY['unsupported_version', 'catalog_mismatch']),
    CHECK (num_nulls(identity_subject, identity_fingerprint, identity_anchor_id,
                     identity_not_after) = ANY (ARRAY[0, 4])),
    CHECK (sync_reason = ANY (ARRAY['reload_failed', 'watcher_stalled', 'ambiguous_address',
                                    'restart_required']))
);
CREATE INDEX agent_instance_class ON agent_instance USING btree (enrollment_token_id, last_source_ip)
    WHERE enrollment_token_id IS NOT NULL;
CREATE INDEX agent_instance_health ON agent_instance USING btree (tenant_id, kind, health);
CREATE INDEX agent_instance_host ON agent_instance USING btree (tenant_id, host_id);

CREATE TABLE class_default (
    tenant_id           uuid        NOT NULL,
    enrollment_token_id uuid        NOT NULL,
    agent_version       text        NOT NULL,
    desired_revision_id bigint,
    desired_artifact    bytea,
    desired_since       timestamptz,
    PRIMARY KEY (enrollment_token_id, agent_version),
    FOREIGN KEY (tenant_id, desired_artifact) REFERENCES artifact (tenant_id, hash),
    FOREIGN KEY (tenant_id, desired_revision_id) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, enrollment_token_id) REFERENCES enrollment_token (tenant_id, id)
        ON DELETE CASCADE
);

CREATE TABLE class_served (
    tenant_id           uuid        NOT NULL,
    enrollment_token_id uuid        NOT NULL,
    address             inet        NOT NULL,
    artifact            bytea       NOT NULL,
    served_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (enrollment_token_id, address),
    FOREIGN KEY (tenant_id, artifact) REFERENCES artifact (tenant_id, hash),
    FOREIGN KEY (tenant_id, enrollment_token_id) REFERENCES enrollment_token (tenant_id, id)
        ON DELETE CASCADE
);

CREATE TABLE agent_credential (
    id                uuid        NOT NULL,
    tenant_id         uuid        NOT NULL,
    agent_instance_id uuid        NOT NULL,
    token_prefix      text        NOT NULL,
    token_hash        bytea       NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    revoked_at        timestamptz,
    PRIMARY KEY (id),
    UNIQUE (token_hash),
    FOREIGN KEY (tenant_id, agent_instance_id) REFERENCES agent_instance (tenant_id, id)
        ON DELETE CASCADE
);
CREATE UNIQUE INDEX agent_credential_active ON agent_credential USING btree (agent_instance_id)
    WHERE revoked_at IS NULL;

CREATE TABLE agent_status_event (
    id                bigserial   NOT NULL,
    tenant_id         uuid        NOT NULL,
    agent_instance_id uuid        NOT NULL,
    ts                timestamptz NOT NULL DEFAULT now(),
    field             text        NOT NULL,
    from_value        text,
    to_value          text        NOT NULL,
    detail            jsonb,
    PRIMARY KEY (id),
    FOREIGN KEY (tenant_id, agent_instance_id) REFERENCES agent_instance (tenant_id, id)
        ON DELETE CASCADE,
    CHECK (field IN ('health', 'sync', 'version', 'applied'))
);
CREATE INDEX agent_status_event_agent ON agent_status_event USING btree (agent_instance_id, ts DESC);

CREATE TABLE agent_log_entry (
    id                bigserial   NOT NULL,
    tenant_id         uuid        NOT NULL,
    agent_instance_id uuid        NOT NULL,
    ts                timestamptz NOT NULL,
    level             text        NOT NULL,
    source            text        NOT NULL,
    instance_key      text,
    message           text        NOT NULL,
    attributes        jsonb,
    PRIMARY KEY (id),
    FOREIGN KEY (tenant_id, agent_instance_id) REFERENCES agent_instance (tenant_id, id)
        ON DELETE CASCADE
);
CREATE INDEX agent_log_entry_agent ON agent_log_entry USING btree (agent_instance_id, ts DESC);

SELECT enable_tenant_isolation(t::regclass)
FROM unnest(ARRAY['artifact', 'agent_instance', 'class_default', 'class_served',
                  'agent_credential', 'agent_status_event', 'agent_log_entry']) AS t;

