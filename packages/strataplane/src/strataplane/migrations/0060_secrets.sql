-- Secrets (spec/strataplane-schema.md): the deployment keyring's fingerprints, per-tenant data
-- keys wrapped under it, sealed values, the versions of the spec's Secret objects and the record
-- of every delivery to an agent.
SET LOCAL search_path TO strataplane;

CREATE TABLE secret_key (
    id          integer     NOT NULL,
    fingerprint bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    exported_at timestamptz,
    retired_at  timestamptz,
    PRIMARY KEY (id),
    UNIQUE (fingerprint)
);

CREATE TABLE tenant_key (
    tenant_id   uuid        NOT NULL,
    id          integer     NOT NULL,
    kek_id      integer     NOT NULL,
    nonce       bytea       NOT NULL,
    wrapped_key bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (kek_id) REFERENCES secret_key (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE sealed_value (
    id         uuid        NOT NULL,
    tenant_id  uuid        NOT NULL,
    owner      text        NOT NULL,
    key_id     integer     NOT NULL,
    nonce      bytea       NOT NULL,
    ciphertext bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, owner),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, key_id) REFERENCES tenant_key (tenant_id, id)
);

CREATE TABLE secret_version (
    tenant_id   uuid        NOT NULL,
    secret_name text        NOT NULL,
    version     integer     NOT NULL,
    value_id    uuid        NOT NULL,
    comment     text,
    created_by  uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz,
    PRIMARY KEY (tenant_id, secret_name, version),
    FOREIGN KEY (created_by) REFERENCES app_user (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (tenant_id, value_id) REFERENCES sealed_value (tenant_id, id),
    CHECK (secret_name ~ '^[A-Za-z0-9_]+$')
);

CREATE SEQUENCE secret_delivery_id_seq;

CREATE TABLE secret_delivery (
    id                bigint      NOT NULL DEFAULT nextval('secret_delivery_id_seq'),
    tenant_id         uuid        NOT NULL,
    secret_name       text        NOT NULL,
    version           integer     NOT NULL,
    agent_instance_id uuid        NOT NULL,
    channel           text        NOT NULL,
    assurance         assurance   NOT NULL,
    identity_subject  text,
    ts                timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    CHECK (channel IN ('telegraf-secretstore', 'elastic-policy', 'vector-config'))
);
ALTER SEQUENCE secret_delivery_id_seq OWNED BY secret_delivery.id;

CREATE INDEX secret_delivery_secret ON secret_delivery USING btree (tenant_id, secret_name, ts DESC);

SELECT enable_tenant_isolation(t::regclass)
FROM unnest(ARRAY['tenant_key', 'sealed_value', 'secret_version', 'secret_delivery']) AS t;
