-- What agents should run (spec/strataplane-schema.md): the release pointer per agent kind, the
-- rollout it may point at, and the impact set of a change set.
SET LOCAL search_path TO strataplane;

CREATE TABLE rollout (
    id               uuid          NOT NULL,
    tenant_id        uuid          NOT NULL,
    number           bigint        NOT NULL,
    agent_kind       agent_kind    NOT NULL,
    from_revision_id bigint        NOT NULL,
    to_revision_id   bigint        NOT NULL,
    policy_name      text,
    guardrails       jsonb         NOT NULL DEFAULT '{}',
    state            rollout_state NOT NULL DEFAULT 'running',
    created_by       uuid,
    created_at       timestamptz   NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    halt_reason      text,
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, number),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, from_revision_id) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, to_revision_id) REFERENCES spec_revision (tenant_id, id),
    CHECK ((state IN ('completed', 'aborted')) = (finished_at IS NOT NULL))
);
CREATE UNIQUE INDEX rollout_one_active ON rollout USING btree (tenant_id, agent_kind)
    WHERE state IN ('running', 'paused', 'halted');

CREATE TABLE release (
    tenant_id   uuid        NOT NULL,
    agent_kind  agent_kind  NOT NULL,
    revision_id bigint      NOT NULL,
    rollout_id  uuid,
    set_at      timestamptz NOT NULL DEFAULT now(),
    set_by      uuid,
    PRIMARY KEY (tenant_id, agent_kind),
    FOREIGN KEY (set_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, revision_id) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, rollout_id) REFERENCES rollout (tenant_id, id)
);

CREATE TABLE change_set_impact (
    tenant_id         uuid  NOT NULL,
    change_set_id     uuid  NOT NULL,
    agent_instance_id uuid  NOT NULL,
    before_artifact   bytea,
    after_artifact    bytea,
    PRIMARY KEY (change_set_id, agent_instance_id),
    FOREIGN KEY (tenant_id, after_artifact) REFERENCES artifact (tenant_id, hash),
    FOREIGN KEY (tenant_id, before_artifact) REFERENCES artifact (tenant_id, hash),
    FOREIGN KEY (tenant_id, change_set_id) REFERENCES change_set (tenant_id, id) ON DELETE CASCADE
);

SELECT enable_tenant_isolation(t::regclass)
FROM unnest(ARRAY['rollout', 'release', 'change_set_impact']) AS t;
