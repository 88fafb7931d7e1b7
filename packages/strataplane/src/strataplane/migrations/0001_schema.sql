-- strataplane's schema (spec/strataplane-schema.md): tenants, identity, audit, operations and
-- idempotency keys. Names, types, defaults, constraints, indexes and policies are the spec's;
-- docs/strataplane/schema.md is generated from the catalog after this runs.
CREATE SCHEMA strataplane;
SET LOCAL search_path TO strataplane;

CREATE TYPE tenant_state AS ENUM ('active', 'suspended', 'deleting');
CREATE TYPE role_name AS ENUM ('viewer', 'author', 'approver', 'operator', 'secret-admin', 'admin');
CREATE TYPE agent_kind AS ENUM ('telegraf', 'elastic-agent', 'strataplane-agent', 'vector');
CREATE TYPE change_set_state AS ENUM ('draft', 'in_review', 'merged', 'closed');
CREATE TYPE operation_state AS ENUM ('queued', 'running', 'succeeded', 'failed');

CREATE TABLE tenant (
    id                  uuid         NOT NULL,
    slug                text         NOT NULL,
    display_name        text         NOT NULL,
    state               tenant_state NOT NULL DEFAULT 'active',
    shard               integer      NOT NULL,
    limits              jsonb        NOT NULL DEFAULT '{}',
    external_id         text,
    entitlement         jsonb,
    entitlement_version bigint,
    created_at          timestamptz  NOT NULL DEFAULT now(),
    updated_at          timestamptz  NOT NULL DEFAULT now(),
    state_since         timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (external_id),
    UNIQUE (slug),
    CHECK (slug ~ '^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$')
);

CREATE TABLE tenant_counter (
    tenant_id uuid   NOT NULL,
    name      text   NOT NULL,
    value     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (name IN ('revision', 'change_set', 'rollout', 'audit'))
);

CREATE TABLE installation (
    id         boolean     NOT NULL DEFAULT true,
    shards     integer     NOT NULL,
    backup_at  timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    CHECK (shards >= 1 AND shards <= 1024),
    CHECK (id)
);

CREATE TABLE controller_shard (
    shard      integer     NOT NULL,
    alive_at   timestamptz NOT NULL,
    resumed_at timestamptz NOT NULL,
    PRIMARY KEY (shard),
    CHECK (shard >= 0)
);

CREATE TABLE app_user (
    id             uuid        NOT NULL,
    kind           text        NOT NULL DEFAULT 'human',
    issuer         text        NOT NULL,
    subject        text        NOT NULL,
    email          text,
    display_name   text        NOT NULL,
    password_hash  text,
    platform_admin boolean     NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_login_at  timestamptz,
    disabled_at    timestamptz,
    PRIMARY KEY (id),
    UNIQUE (issuer, subject),
    CHECK (kind = 'human' OR (password_hash IS NULL AND NOT platform_admin)),
    CHECK ((kind = 'service') = (issuer = 'service')),
    CHECK (kind IN ('human', 'service'))
);

CREATE TABLE tenant_member (
    tenant_id   uuid        NOT NULL,
    user_id     uuid        NOT NULL,
    source      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz,
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (user_id) REFERENCES app_user (id) ON DELETE CASCADE,
    CHECK (source IN ('local', 'oidc', 'service', 'billing'))
);

CREATE TABLE team (
    id           uuid        NOT NULL,
    tenant_id    uuid        NOT NULL,
    slug         text        NOT NULL,
    display_name text        NOT NULL,
    source       text        NOT NULL,
    external_id  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, slug),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    CHECK (source IN ('local', 'oidc'))
);

CREATE TABLE team_member (
    tenant_id uuid        NOT NULL,
    team_id   uuid        NOT NULL,
    user_id   uuid        NOT NULL,
    synced_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, user_id),
    FOREIGN KEY (tenant_id, team_id) REFERENCES team (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, user_id) REFERENCES tenant_member (tenant_id, user_id)
        ON DELETE CASCADE,
    FOREIGN KEY (user_id) REFERENCES app_user (id) ON DELETE CASCADE
);

CREATE TABLE service_account (
    id            uuid        NOT NULL,
    tenant_id     uuid        NOT NULL,
    name          text        NOT NULL,
    description   text,
    owner_team_id uuid,
    created_by    uuid,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, name),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (id) REFERENCES app_user (id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, id) REFERENCES tenant_member (tenant_id, user_id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, owner_team_id) REFERENCES team (tenant_id, id)
        ON DELETE SET NULL (owner_team_id)
);

CREATE TABLE role_binding (
    id             uuid        NOT NULL,
    tenant_id      uuid        NOT NULL,
    user_id        uuid,
    team_id        uuid,
    role           role_name   NOT NULL,
    scope_kind     text        NOT NULL,
    scope_team_id  uuid,
    scope_selector jsonb,
    created_by     uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE NULLS NOT DISTINCT
        (tenant_id, user_id, team_id, role, scope_kind, scope_team_id, scope_selector),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, scope_team_id) REFERENCES team (tenant_id, id),
    FOREIGN KEY (tenant_id, team_id) REFERENCES team (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, user_id) REFERENCES tenant_member (tenant_id, user_id)
        ON DELETE CASCADE,
    CHECK ((scope_kind = 'owner') = (scope_team_id IS NOT NULL)
           AND (scope_kind = 'selector') = (scope_selector IS NOT NULL)),
    CHECK (role <> 'admin' OR scope_kind = 'tenant'),
    CHECK (num_nonnulls(user_id, team_id) = 1),
    CHECK (scope_kind IN ('tenant', 'owner', 'selector'))
);

CREATE TABLE api_token (
    id           uuid        NOT NULL,
    tenant_id    uuid,
    name         text        NOT NULL,
    token_prefix text        NOT NULL,
    token_hash   bytea       NOT NULL,
    user_id      uuid        NOT NULL,
    roles        role_name[],
    expires_at   timestamptz,
    last_used_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    PRIMARY KEY (id),
    UNIQUE (token_hash),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES tenant_member (tenant_id, user_id)
        ON DELETE CASCADE,
    FOREIGN KEY (user_id) REFERENCES app_user (id) ON DELETE CASCADE
);

CREATE TABLE web_session (
    id          text        NOT NULL,
    data        bytea       NOT NULL,
    expiry_date timestamptz NOT NULL,
    PRIMARY KEY (id)
);
CREATE INDEX web_session_expiry ON web_session USING btree (expiry_date);

CREATE TABLE audit_event (
    tenant_id    uuid        NOT NULL,
    seq          bigint      NOT NULL,
    ts           timestamptz NOT NULL DEFAULT now(),
    actor_kind   text        NOT NULL,
    actor_id     text,
    on_behalf_of uuid,
    action       text        NOT NULL,
    object_kind  text        NOT NULL,
    object_id    text        NOT NULL,
    request_id   text,
    source_ip    inet,
    details      jsonb       NOT NULL DEFAULT '{}',
    prev_hash    bytea,
    hash         bytea       NOT NULL,
    PRIMARY KEY (tenant_id, seq),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (actor_kind IN ('user', 'agent', 'system', 'assistant'))
);
CREATE INDEX audit_event_object
    ON audit_event USING btree (tenant_id, object_kind, object_id, ts DESC);

CREATE TABLE platform_audit_event (
    id          bigserial   NOT NULL,
    ts          timestamptz NOT NULL DEFAULT now(),
    actor_kind  text        NOT NULL,
    actor_id    text,
    action      text        NOT NULL,
    object_kind text        NOT NULL,
    object_id   text        NOT NULL,
    tenant_id   uuid,
    request_id  text,
    source_ip   inet,
    details     jsonb       NOT NULL DEFAULT '{}',
    prev_hash   bytea,
    hash        bytea       NOT NULL,
    PRIMARY KEY (id),
    CHECK (actor_kind IN ('user', 'system', 'idp'))
);

CREATE TABLE operation (
    id          uuid            NOT NULL,
    tenant_id   uuid,
    kind        text            NOT NULL,
    object_id   text            NOT NULL,
    state       operation_state NOT NULL DEFAULT 'queued',
    progress    real,
    result      jsonb,
    error       jsonb,
    created_by  uuid,
    created_at  timestamptz     NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (id),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (progress >= 0 AND progress <= 1),
    CHECK ((state = 'failed') = (error IS NOT NULL)),
    CHECK ((state IN ('succeeded', 'failed')) = (finished_at IS NOT NULL))
);
CREATE UNIQUE INDEX operation_active ON operation USING btree (kind, object_id)
    WHERE state IN ('queued', 'running');
CREATE INDEX operation_finished ON operation USING btree (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX operation_tenant ON operation USING btree (tenant_id, kind, state);

CREATE TABLE idempotency_key (
    principal_id     uuid        NOT NULL,
    key              text        NOT NULL,
    tenant_id        uuid,
    request_hash     bytea       NOT NULL,
    response_status  integer     NOT NULL,
    response_body    bytea       NOT NULL,
    response_headers jsonb       NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (principal_id, tenant_id, key),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (length(key) <= 255)
);
CREATE INDEX idempotency_key_created ON idempotency_key USING btree (created_at);

-- Every table with a tenant_id except platform_audit_event: visible only in its tenant's
-- scope or in platform scope, for the owner too (FORCE). Without WITH CHECK the USING
-- expression also checks inserted and updated rows. Later migrations call the same function
-- for their tenant tables.
CREATE FUNCTION enable_tenant_isolation(tbl regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format(
        'CREATE POLICY tenant_isolation ON %s USING ('
        'tenant_id = NULLIF(current_setting(''strataplane.tenant'', true), '''')::uuid '
        'OR current_setting(''strataplane.scope'', true) = ''platform'')', tbl);
END
$$;
REVOKE EXECUTE ON FUNCTION enable_tenant_isolation(regclass) FROM PUBLIC, strataplane_app;

SELECT enable_tenant_isolation(t::regclass)
FROM unnest(ARRAY['tenant_counter', 'tenant_member', 'team', 'team_member', 'service_account',
                  'role_binding', 'api_token', 'audit_event', 'operation',
                  'idempotency_key']) AS t;
