-- The fleet's inventory (spec/strataplane-schema.md): hosts and their labels, network zones,
-- enrollment tokens and trust anchors (the target of agent_instance's identity columns).
SET LOCAL search_path TO strataplane;

CREATE TYPE host_kind AS ENUM ('server', 'client', 'pod');
CREATE TYPE label_source AS ENUM ('agent', 'zone', 'enrollment', 'placement', 'manual');
CREATE TYPE agent_health AS ENUM ('pending', 'healthy', 'degraded', 'failed', 'not_reporting');
CREATE TYPE agent_sync AS ENUM ('in_sync', 'updating', 'out_of_sync', 'render_error');
CREATE TYPE assurance AS ENUM ('low', 'high');
CREATE TYPE rollout_state AS ENUM ('running', 'paused', 'halted', 'completed', 'aborted');

CREATE TABLE host (
    id            uuid        NOT NULL,
    tenant_id     uuid        NOT NULL,
    name          text        NOT NULL,
    kind          host_kind   NOT NULL DEFAULT 'server',
    owner_team_id uuid,
    labels        jsonb       NOT NULL DEFAULT '{}',
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, owner_team_id) REFERENCES team (tenant_id, id)
        ON DELETE SET NULL (owner_team_id)
);
CREATE INDEX host_labels_gin ON host USING gin (labels jsonb_path_ops);
CREATE INDEX host_owner ON host USING btree (tenant_id, owner_team_id);

CREATE TABLE host_label (
    tenant_id  uuid         NOT NULL,
    host_id    uuid         NOT NULL,
    source     label_source NOT NULL,
    key        text         NOT NULL,
    value      text         NOT NULL,
    updated_at timestamptz  NOT NULL DEFAULT now(),
    PRIMARY KEY (host_id, source, key),
    FOREIGN KEY (tenant_id, host_id) REFERENCES host (tenant_id, id) ON DELETE CASCADE,
    CHECK (key ~ '^[a-z0-9]([a-z0-9_.\-/]{0,126}[a-z0-9])?$'
           AND key <> ALL (ARRAY['host.name', 'host.kind', 'owner'])
           AND (source = 'agent' OR key <> ALL (ARRAY['os', 'arch']))),
    CHECK (length(value) <= 256 AND value !~ '[[:cntrl:]]')
);

CREATE TABLE network_zone (
    id        uuid  NOT NULL,
    tenant_id uuid  NOT NULL,
    cidr      cidr  NOT NULL,
    labels    jsonb NOT NULL,
    PRIMARY KEY (id),
    UNIQUE (tenant_id, cidr),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);
CREATE INDEX network_zone_cidr ON network_zone USING gist (cidr inet_ops);

CREATE TABLE enrollment_token (
    id                uuid        NOT NULL,
    tenant_id         uuid        NOT NULL,
    name              text        NOT NULL,
    agent_kind        agent_kind  NOT NULL,
    token_prefix      text        NOT NULL,
    token_hash        bytea       NOT NULL,
    labels            jsonb       NOT NULL DEFAULT '{}',
    host_kind         host_kind   NOT NULL DEFAULT 'server',
    mode              text        NOT NULL DEFAULT 'enroll',
    requires_approval boolean     NOT NULL DEFAULT false,
    max_uses          integer,
    uses              integer     NOT NULL DEFAULT 0,
    expires_at        timestamptz,
    created_by        uuid,
    created_at        timestamptz NOT NULL DEFAULT now(),
    revoked_at        timestamptz,
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (token_hash),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (mode <> 'class' OR agent_kind = 'telegraf'),
    CHECK (mode <> 'pair' OR (agent_kind = 'strataplane-agent' AND created_by IS NOT NULL)),
    CHECK (mode IN ('enroll', 'class', 'pair'))
);

CREATE TABLE trust_anchor (
    id           uuid        NOT NULL,
    tenant_id    uuid        NOT NULL,
    name         text        NOT NULL,
    ca_pem       text        NOT NULL,
    crl_url      text,
    host_mapping text        NOT NULL DEFAULT 'san-dns',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, name),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (host_mapping IN ('san-dns', 'cn', 'san-uri-spiffe'))
);

SELECT enable_tenant_isolation(t::regclass)
FROM unnest(ARRAY['host', 'host_label', 'network_zone', 'enrollment_token',
                  'trust_anchor']) AS t;
