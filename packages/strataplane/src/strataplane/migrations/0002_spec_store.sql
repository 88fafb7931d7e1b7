-- The spec store (docs/strataplane/architecture.md §2, §3): content-addressed blobs, immutable
-- revisions, the object index with validity ranges, change sets and their reviews.
SET LOCAL search_path TO strataplane;

CREATE TABLE spec_blob (
    tenant_id  uuid        NOT NULL,
    hash       bytea       NOT NULL,
    content    bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, hash),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE spec_revision (
    tenant_id  uuid        NOT NULL,
    id         bigint      NOT NULL,
    tree_hash  bytea       NOT NULL,
    message    text        NOT NULL,
    created_by uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE spec_object (
    tenant_id      uuid       NOT NULL,
    kind           text       NOT NULL,
    name           text       NOT NULL,
    path           text       NOT NULL,
    blob_hash      bytea      NOT NULL,
    owner_team     text       NOT NULL,
    agent_kind     agent_kind,
    agent_versions text,
    precedence     integer,
    selector       jsonb,
    valid_from     bigint     NOT NULL,
    valid_to       bigint,
    PRIMARY KEY (tenant_id, kind, name, valid_from),
    FOREIGN KEY (tenant_id, blob_hash) REFERENCES spec_blob (tenant_id, hash),
    FOREIGN KEY (tenant_id, valid_from) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, valid_to) REFERENCES spec_revision (tenant_id, id),
    CHECK ((kind = 'Secret' AND name ~ '^[A-Za-z0-9_]+$')
           OR (kind <> 'Secret' AND name ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$')),
    CHECK (kind = 'Layer' OR agent_versions IS NULL),
    CHECK ((kind IN ('Layer', 'Bundle', 'Route', 'Journey')) = (agent_kind IS NOT NULL)),
    CHECK (kind IN ('Layer', 'Bundle', 'Route', 'Secret', 'Journey', 'RolloutPolicy',
                    'ApprovalPolicy', 'Settings', 'Placement')),
    CHECK (valid_to > valid_from)
);
CREATE UNIQUE INDEX spec_object_current ON spec_object USING btree (tenant_id, kind, name)
    WHERE valid_to IS NULL;
CREATE UNIQUE INDEX spec_object_current_path ON spec_object USING btree (tenant_id, path)
    WHERE valid_to IS NULL;
CREATE INDEX spec_object_path ON spec_object USING btree (tenant_id, path, valid_from DESC);

CREATE TABLE change_set (
    id                  uuid             NOT NULL,
    tenant_id           uuid             NOT NULL,
    number              bigint           NOT NULL,
    title               text             NOT NULL,
    description         text             NOT NULL DEFAULT '',
    author_id           uuid             NOT NULL,
    assistant_chat_id   uuid,
    base_revision_id    bigint           NOT NULL,
    state               change_set_state NOT NULL DEFAULT 'draft',
    digest              bytea            NOT NULL,
    validated_digest    bytea,
    validation          jsonb,
    impact              jsonb,
    requirements        jsonb,
    reverts_revision_id bigint,
    merged_revision_id  bigint,
    created_at          timestamptz      NOT NULL DEFAULT now(),
    updated_at          timestamptz      NOT NULL DEFAULT now(),
    submitted_at        timestamptz,
    merged_at           timestamptz,
    closed_at           timestamptz,
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, merged_revision_id),
    UNIQUE (tenant_id, number),
    FOREIGN KEY (author_id) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, base_revision_id) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, merged_revision_id) REFERENCES spec_revision (tenant_id, id),
    FOREIGN KEY (tenant_id, reverts_revision_id) REFERENCES spec_revision (tenant_id, id),
    CHECK ((state = 'merged') = (merged_revision_id IS NOT NULL)
           AND (state = 'merged') = (merged_at IS NOT NULL)
           AND (state = 'closed') = (closed_at IS NOT NULL)),
    CHECK (state NOT IN ('in_review', 'merged') OR validated_digest IS NOT DISTINCT FROM digest)
);

CREATE TABLE change_set_file (
    tenant_id     uuid        NOT NULL,
    change_set_id uuid        NOT NULL,
    path          text        NOT NULL,
    blob_hash     bytea,
    base_hash     bytea,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (change_set_id, path),
    FOREIGN KEY (tenant_id, blob_hash) REFERENCES spec_blob (tenant_id, hash),
    FOREIGN KEY (tenant_id, change_set_id) REFERENCES change_set (tenant_id, id)
        ON DELETE CASCADE
);

CREATE TABLE change_set_review (
    id            uuid        NOT NULL,
    tenant_id     uuid        NOT NULL,
    change_set_id uuid        NOT NULL,
    reviewer_id   uuid        NOT NULL,
    decision      text        NOT NULL,
    digest        bytea       NOT NULL,
    acting_teams  text[]      NOT NULL DEFAULT '{}',
    comment       text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    FOREIGN KEY (reviewer_id) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id, change_set_id) REFERENCES change_set (tenant_id, id)
        ON DELETE CASCADE,
    CHECK (decision IN ('approve', 'reject', 'comment'))
);

SELECT enable_tenant_isolation(t::regclass)
FROM unnest(ARRAY['spec_blob', 'spec_revision', 'spec_object', 'change_set', 'change_set_file',
                  'change_set_review']) AS t;
