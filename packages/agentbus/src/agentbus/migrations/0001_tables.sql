-- AgentBus control plane: the tables of the data model, §1 and §5.1 (tenant_keys), as written.
-- docs/agentbus/schema.md is generated from the result. Additions where the model is silent are
-- marked "addition". pgcrypto is not installed: tokens are minted in Python (decision 0004).
-- btree_gist is created by the migrator before this file runs (Migrator.extensions).

-- 1.3 Tenancy and identity

CREATE TYPE plan_t AS ENUM ('starter', 'business', 'enterprise');
CREATE TYPE tenant_status_t AS ENUM ('active', 'suspended', 'deleting', 'deleted');

CREATE TABLE tenants (
    id              uuid PRIMARY KEY,                         -- ten_
    slug            text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9-]{3,40}$'),
    display_name    text NOT NULL,
    plan            plan_t NOT NULL DEFAULT 'starter',
    status          tenant_status_t NOT NULL DEFAULT 'active',
    region          text NOT NULL DEFAULT 'eu-west',          -- data residency, see §6
    retention_days  int  NOT NULL DEFAULT 7,                  -- derived from plan, overridable on enterprise
    nats_stream     text NOT NULL,                            -- T_<id without hyphens>
    nats_account    text,                                     -- dedicated NATS account (enterprise), else NULL
    kek_ref         text NOT NULL,                            -- key encryption key reference, see §5
    custom_domain   text UNIQUE,                              -- enterprise, e.g. bus.acme.com
    settings        jsonb NOT NULL DEFAULT '{}'::jsonb,       -- support_access_consent, default_visibility, ...
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz
);

CREATE TABLE workspaces (
    id              uuid PRIMARY KEY,                         -- ws_
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    slug            text NOT NULL CHECK (slug ~ '^[a-z0-9-]{3,40}$'),
    display_name    text NOT NULL,
    description     text,
    settings        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz,
    UNIQUE (tenant_id, slug)
);

-- Users are tenant-scoped. The same human in two tenants is two rows; the IdP subject links them.
CREATE TABLE users (
    id              uuid PRIMARY KEY,                         -- usr_
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    idp             text NOT NULL,                            -- 'clerk', 'oidc:<issuer>', 'saml:<issuer>'
    idp_subject     text NOT NULL,                            -- the IdP's stable subject claim
    email           text NOT NULL,
    display_name    text,
    status          text NOT NULL DEFAULT 'active' CHECK (status IN ('invited','active','disabled')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_login_at   timestamptz,
    UNIQUE (tenant_id, idp, idp_subject),
    UNIQUE (tenant_id, email)
);

CREATE TYPE tenant_role_t AS ENUM ('owner', 'admin', 'member', 'auditor', 'billing');
CREATE TYPE ws_role_t     AS ENUM ('admin', 'member', 'viewer');

-- Tenant-level role.
CREATE TABLE tenant_memberships (
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    user_id         uuid NOT NULL REFERENCES users(id),
    role            tenant_role_t NOT NULL DEFAULT 'member',
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

-- Workspace-level role. A user must be a tenant member to be a workspace member.
CREATE TABLE workspace_memberships (
    tenant_id       uuid NOT NULL,
    workspace_id    uuid NOT NULL REFERENCES workspaces(id),
    user_id         uuid NOT NULL REFERENCES users(id),
    role            ws_role_t NOT NULL DEFAULT 'member',
    invited_by      uuid REFERENCES users(id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES tenant_memberships(tenant_id, user_id)
);

-- Pending invitations (email-based). SSO-mapped joins do not use this table.
CREATE TABLE invitations (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    workspace_id    uuid REFERENCES workspaces(id),
    email           text NOT NULL,
    role            ws_role_t NOT NULL DEFAULT 'member',
    token_hash      bytea NOT NULL,                           -- SHA-256 of the one-time link token
    invited_by      uuid NOT NULL REFERENCES users(id),
    expires_at      timestamptz NOT NULL,
    accepted_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- 1.4 Credentials

-- Long-lived integration tokens: one per harness/integration, created in the console or CLI.
-- The plaintext is shown exactly once. ab_live_<40> / ab_test_<40>.
CREATE TABLE integration_tokens (
    id              uuid PRIMARY KEY,                         -- tok_
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    workspace_id    uuid REFERENCES workspaces(id),           -- NULL = tenant-wide (admin only)
    owner_user_id   uuid NOT NULL REFERENCES users(id),
    name            text NOT NULL,                            -- 'claude-code on laptop', 'ci-runner'
    env             text NOT NULL CHECK (env IN ('live','test')),
    token_hash      bytea NOT NULL UNIQUE,                    -- SHA-256(plaintext); high-entropy so no KDF needed
    prefix          text NOT NULL,                            -- 'ab_live_' + first 6 chars, for display and leak scanning
    last4           text NOT NULL,
    scopes          text[] NOT NULL DEFAULT '{send,receive,register}',  -- send, receive, register, read_audit, admin
    expires_at      timestamptz,
    last_used_at    timestamptz,
    last_used_ip    inet,
    revoked_at      timestamptz,
    revoked_reason  text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON integration_tokens (tenant_id, owner_user_id) WHERE revoked_at IS NULL;

-- Short-lived agent credentials are JWTs and are not stored. Their signing keys are:
CREATE TABLE signing_keys (
    kid             text PRIMARY KEY,
    alg             text NOT NULL DEFAULT 'EdDSA',
    public_key      bytea NOT NULL,
    private_key_enc bytea NOT NULL,                           -- wrapped by the platform KEK
    active          boolean NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL DEFAULT now(),
    retired_at      timestamptz
);

-- 1.5 Agents

CREATE TYPE visibility_t   AS ENUM ('private', 'workspace', 'tenant', 'public');
CREATE TYPE agent_status_t AS ENUM ('registered', 'online', 'idle', 'offline', 'disabled', 'deleted');
CREATE TYPE harness_t      AS ENUM ('claude', 'codex', 'opencode', 'gemini', 'custom');

CREATE TABLE agents (
    id              uuid PRIMARY KEY,                         -- agt_
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    workspace_id    uuid NOT NULL REFERENCES workspaces(id),
    owner_user_id   uuid NOT NULL REFERENCES users(id),
    name            text NOT NULL CHECK (name ~ '^[a-z0-9-]{3,40}$'),
    address         text NOT NULL,                            -- agent://<tenant-slug>/<ws-slug>/<name>, denormalised
    display_name    text,
    description     text NOT NULL DEFAULT '',                 -- shown in the workspace directory
    capabilities    jsonb NOT NULL DEFAULT '[]'::jsonb,       -- [{"name":"code.review","version":"1","description":"..."}]
    agent_card      jsonb NOT NULL DEFAULT '{}'::jsonb,       -- A2A-compatible card, generated + user fields
    harness         harness_t NOT NULL DEFAULT 'custom',
    harness_version text,
    mode            text NOT NULL DEFAULT 'interactive' CHECK (mode IN ('interactive','service')),
    visibility      visibility_t NOT NULL DEFAULT 'workspace',
    status          agent_status_t NOT NULL DEFAULT 'registered',
    nats_consumer   text NOT NULL,                            -- agt_<id>
    inbox_subject   text NOT NULL,                            -- t.<tenant>.ws.<ws>.agent.<id>.inbox
    delivery        jsonb NOT NULL DEFAULT '{"strict_order":false}'::jsonb,
    last_seen_at    timestamptz,
    last_host       text,                                     -- hostname fingerprint from the sidecar, for doctor
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz,
    UNIQUE (workspace_id, name),
    UNIQUE (address)
);
CREATE INDEX ON agents (tenant_id, workspace_id) WHERE deleted_at IS NULL;
CREATE INDEX ON agents USING gin (capabilities jsonb_path_ops);

-- Ed25519 keys the sidecar generates. Multiple rows allow rotation without a gap.
CREATE TABLE agent_keys (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    agent_id        uuid NOT NULL REFERENCES agents(id),
    public_key      bytea NOT NULL,                           -- 32 bytes
    fingerprint     text NOT NULL,                            -- SHA-256 base64url, shown in console
    spiffe_id       text NOT NULL,                            -- spiffe://<tenant-slug>.agentbus.exchange/ws/<ws>/agent/<id>
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,                     -- 90 days default; sidecar rotates at 60
    revoked_at      timestamptz,
    UNIQUE (agent_id, public_key)
);
CREATE INDEX ON agent_keys (agent_id) WHERE revoked_at IS NULL;

-- 1.6 Conversations, messages, tasks

CREATE TABLE conversations (
    id              uuid PRIMARY KEY,                         -- cnv_
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    workspace_id    uuid NOT NULL REFERENCES workspaces(id),
    started_by      uuid NOT NULL REFERENCES agents(id),
    title           text,                                     -- optional, set by first message's data.title
    participants    uuid[] NOT NULL DEFAULT '{}',             -- maintained by trigger on messages insert
    message_count   int  NOT NULL DEFAULT 0,
    last_message_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON conversations (tenant_id, last_message_at DESC);
COMMENT ON TABLE conversations IS
    'participants, message_count and last_message_at are maintained by the trigger '
    'messages_conversation_stats on messages insert; the send path does not update them.';

CREATE TYPE message_status_t AS ENUM (
    'accepted', 'fetched', 'delivered', 'read', 'expired', 'dead_lettered', 'discarded', 'bridged'
);

-- Envelope metadata only. The payload (`data`) is encrypted and lives in S3; payload_ref points at it.
-- Partitioned by month on accepted_at for cheap retention drops.
CREATE TABLE messages (
    id              uuid NOT NULL,                            -- msg_ = CloudEvents id
    tenant_id       uuid NOT NULL,
    workspace_id    uuid NOT NULL,
    conversation_id uuid NOT NULL,
    type            text NOT NULL,                            -- agentbus.task.request.v1 ...
    schema_url      text NOT NULL,
    from_agent_id   uuid NOT NULL,
    to_agent_id     uuid,                                     -- NULL for topic:// (post-MVP)
    to_address      text NOT NULL,
    correlation_id  uuid,
    reply_to        text,
    idempotency_key text,
    capability      text,
    capability_ver  text,
    priority        text NOT NULL DEFAULT 'normal' CHECK (priority IN ('low','normal','high')),
    budget          jsonb,
    expires_at      timestamptz,
    traceparent     text NOT NULL,
    trace_id        text GENERATED ALWAYS AS (split_part(traceparent, '-', 2)) STORED,
    sig             bytea NOT NULL,
    signing_key_id  uuid NOT NULL,
    payload_ref     text NOT NULL,                            -- s3 key, see §4
    payload_bytes   int  NOT NULL,
    payload_sha256  bytea NOT NULL,                           -- of the plaintext, for integrity after decrypt
    dek_version     int  NOT NULL,                            -- which tenant DEK encrypted it
    status          message_status_t NOT NULL DEFAULT 'accepted',
    stream_seq      bigint,                                   -- NULL until NATS PubAck
    attempts        int  NOT NULL DEFAULT 0,
    bridged_from    uuid,                                     -- source tenant for cross-tenant (post-MVP)
    accepted_at     timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    read_at         timestamptz,
    PRIMARY KEY (tenant_id, accepted_at, id)
) PARTITION BY RANGE (accepted_at);
COMMENT ON TABLE messages IS
    'Partitioned by month on accepted_at (UTC month bounds): messages_YYYY_MM, created 3 months '
    'ahead by ensure_message_partitions(); partitions are reachable only through this table.';

-- Monthly partitions are created by ensure_message_partitions() in migration 0003 and by the
-- daily partitions job, not by name here.

CREATE UNIQUE INDEX messages_id_uq ON messages (tenant_id, id, accepted_at);     -- dedupe lookups
CREATE INDEX messages_to_status ON messages (to_agent_id, status, accepted_at)   -- inbox queries
    WHERE status IN ('accepted','fetched','delivered');
CREATE INDEX messages_conv ON messages (conversation_id, accepted_at);
CREATE INDEX messages_trace ON messages (trace_id);
CREATE INDEX messages_unpublished ON messages (accepted_at) WHERE stream_seq IS NULL;  -- reconciler

CREATE TYPE task_state_t AS ENUM (
    'submitted', 'delivered', 'accepted', 'in_progress', 'completed', 'failed', 'rejected',
    'cancelled', 'expired'
);

CREATE TABLE tasks (
    id                  uuid PRIMARY KEY,                     -- tsk_
    tenant_id           uuid NOT NULL REFERENCES tenants(id),
    workspace_id        uuid NOT NULL REFERENCES workspaces(id),
    conversation_id     uuid NOT NULL REFERENCES conversations(id),
    request_msg_id      uuid NOT NULL,
    requester_agent_id  uuid NOT NULL REFERENCES agents(id),
    recipient_agent_id  uuid NOT NULL REFERENCES agents(id),
    idempotency_key     text NOT NULL,
    capability          text NOT NULL,
    capability_ver      text NOT NULL DEFAULT '1',
    state               task_state_t NOT NULL DEFAULT 'submitted',
    budget              jsonb,                                -- {"currency":"USD","max":"2.00"}
    spent               numeric(12,6) NOT NULL DEFAULT 0,
    grant_id            uuid,                                 -- post-MVP cross-tenant
    result_msg_id       uuid,
    error_code          text,
    progress            jsonb,                                -- last task.progress payload summary
    submitted_at        timestamptz NOT NULL DEFAULT now(),
    delivered_at        timestamptz,
    accepted_at         timestamptz,
    started_at          timestamptz,
    finished_at         timestamptz,
    expires_at          timestamptz,
    duration_ms         bigint GENERATED ALWAYS AS (
                            CASE WHEN finished_at IS NOT NULL AND accepted_at IS NOT NULL
                                 THEN (EXTRACT(EPOCH FROM finished_at - accepted_at) * 1000)::bigint END) STORED,
    UNIQUE (recipient_agent_id, idempotency_key)              -- the task idempotency guarantee
);
CREATE INDEX ON tasks (tenant_id, state, submitted_at DESC);
CREATE INDEX ON tasks (recipient_agent_id, state) WHERE state IN ('submitted','delivered','accepted','in_progress');

-- Append-only task transitions, for the console timeline and for disputes.
CREATE TABLE task_transitions (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL,
    task_id         uuid NOT NULL REFERENCES tasks(id),
    from_state      task_state_t,
    to_state        task_state_t NOT NULL,
    by_msg_id       uuid,
    reason          text,
    at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON task_transitions (task_id, at);

-- 1.7 Delivery state and receipts

CREATE TABLE delivery_state (
    tenant_id       uuid NOT NULL,
    msg_id          uuid NOT NULL,
    agent_id        uuid NOT NULL,
    attempt         int  NOT NULL DEFAULT 0,
    last_fetched_at timestamptz,
    transport_acked_at   timestamptz,
    application_acked_at timestamptz,
    nak_until       timestamptz,
    dlq_reason      text,
    PRIMARY KEY (msg_id, agent_id)
);

CREATE TABLE receipts (
    id              uuid PRIMARY KEY,                         -- rcp_
    tenant_id       uuid NOT NULL,
    msg_id          uuid NOT NULL,
    stream_seq      bigint,
    issued_to_token uuid NOT NULL,
    issued_at       timestamptz NOT NULL DEFAULT now(),
    signature       bytea NOT NULL                            -- gateway signs {id,msg_id,seq,issued_at} with signing_keys
);
CREATE INDEX ON receipts (msg_id);

-- 1.8 Policies and grants

CREATE TABLE policies (
    id              uuid PRIMARY KEY,                         -- pol_
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    workspace_id    uuid REFERENCES workspaces(id),           -- NULL = tenant-wide
    name            text NOT NULL,
    version         int  NOT NULL DEFAULT 1,
    cedar           text NOT NULL,                            -- Cedar policy text, validated against the schema on save
    enabled         boolean NOT NULL DEFAULT true,
    created_by      uuid NOT NULL REFERENCES users(id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, workspace_id, name, version)
);

-- Post-MVP. Shaped now so the Cedar schema and FK targets are stable.
CREATE TYPE grant_status_t AS ENUM ('requested', 'active', 'suspended', 'revoked', 'expired');
CREATE TABLE grants (
    id                  uuid PRIMARY KEY,                     -- grt_
    tenant_id           uuid NOT NULL REFERENCES tenants(id), -- the publishing (granting) tenant
    publisher_agent_id  uuid NOT NULL REFERENCES agents(id),
    consumer_tenant_id  uuid NOT NULL REFERENCES tenants(id),
    consumer_ws_id      uuid,                                 -- NULL = any workspace in consumer tenant
    consumer_agent_id   uuid,                                 -- NULL = any agent in scope
    allowed_types       text[] NOT NULL DEFAULT '{agentbus.task.request.v1,agentbus.message.v1}',
    capabilities        text[] NOT NULL,
    rate_per_minute     int  NOT NULL DEFAULT 60,
    pricing             jsonb,                                -- {"model":"per_task","amount":"0.50","currency":"USD"}
    approval            text NOT NULL CHECK (approval IN ('auto','manual','paid')),
    status              grant_status_t NOT NULL DEFAULT 'requested',
    requested_by        uuid,
    approved_by         uuid,
    starts_at           timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON grants (consumer_tenant_id, status);

-- 1.9 Blobs, audit actions, plans

CREATE TABLE blobs (
    id              uuid PRIMARY KEY,                              -- rendered as blb_...
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    uploaded_by     uuid NOT NULL REFERENCES agents(id),
    s3_key          text NOT NULL,
    content_type    text NOT NULL,
    size_bytes      bigint NOT NULL,
    sha256          bytea NOT NULL,
    dek_version     int  NOT NULL,
    ref_count       int  NOT NULL DEFAULT 0,                  -- messages referencing it; GC when 0 past retention
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Actions by humans with elevated access: console admins, support staff, platform operators.
-- Visible to the tenant in their own audit view. Never deleted by retention.
CREATE TABLE audit_actions (
    id              uuid PRIMARY KEY,
    tenant_id       uuid REFERENCES tenants(id),              -- NULL for platform-level actions
    actor_type      text NOT NULL CHECK (actor_type IN ('user','support','platform','system')),
    actor_id        text NOT NULL,                            -- usr_ id or staff id
    action          text NOT NULL,                            -- 'token.create', 'support.view_payload', 'policy.update'
    target_type     text,
    target_id       text,
    consent_ref     uuid,                                     -- support actions must reference a consent window
    details         jsonb NOT NULL DEFAULT '{}'::jsonb,
    ip              inet,
    user_agent      text,
    at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON audit_actions (tenant_id, at DESC);

-- Time-boxed consent for support staff to view payloads. Created by a tenant admin in the console.
CREATE TABLE support_consents (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    granted_by      uuid NOT NULL REFERENCES users(id),
    scope           jsonb NOT NULL,                           -- {"agents":[...],"from":..,"to":..,"payloads":true}
    starts_at       timestamptz NOT NULL DEFAULT now(),
    ends_at         timestamptz NOT NULL,
    revoked_at      timestamptz,
    ticket_ref      text
);

CREATE TABLE plans (
    code            plan_t PRIMARY KEY,
    limits          jsonb NOT NULL   -- {"workspaces":1,"agents":10,"retention_days":7,"pending_per_agent":1000,"stream_bytes":1073741824,"publish_per_minute":60,"blob_bytes":104857600}
);

CREATE TABLE subscriptions (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants(id) UNIQUE,
    plan            plan_t NOT NULL,
    billing_ref     text,                                     -- Stripe customer/subscription id
    status          text NOT NULL DEFAULT 'active',
    current_period_start timestamptz,
    current_period_end   timestamptz,
    overrides       jsonb NOT NULL DEFAULT '{}'::jsonb,       -- enterprise negotiated limits
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- 5.1 Key hierarchy: tenant DEKs, stored wrapped by the tenant KEK.

CREATE TABLE tenant_keys (
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    version         int  NOT NULL,
    dek_wrapped     bytea NOT NULL,                           -- DEK encrypted by the KEK
    kek_ref         text NOT NULL,                            -- 'kms://platform/<key-id>' or 'kms://aws/arn:...' or 'vault://...'
    kek_provider    text NOT NULL CHECK (kek_provider IN ('platform','aws_kms','gcp_kms','vault')),
    status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active','retired','destroyed')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    retired_at      timestamptz,
    PRIMARY KEY (tenant_id, version)
);

-- addition: the trigger the conversations table names. It runs as the inserting role, inside
-- the same tenant scope, so RLS confines it to the message's own conversation.
CREATE FUNCTION messages_conversation_stats() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE conversations c
       SET participants = c.participants || ARRAY(
               SELECT DISTINCT a FROM unnest(ARRAY[NEW.from_agent_id, NEW.to_agent_id]) AS a
                WHERE a IS NOT NULL AND NOT a = ANY (c.participants)),
           message_count = c.message_count + 1,
           last_message_at = GREATEST(c.last_message_at, NEW.accepted_at)
     WHERE c.id = NEW.conversation_id AND c.tenant_id = NEW.tenant_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_conversation_stats AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_conversation_stats();
