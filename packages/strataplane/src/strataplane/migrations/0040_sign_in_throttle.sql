-- Failed sign-ins per account and per source address (platformkit.signin, docs/decisions/0025):
-- keys are SHA-256 digests, never the names or addresses themselves. An addition to
-- spec/strataplane-schema.md. Installation-wide, like app_user: no tenant data, no row security.
SET LOCAL search_path TO strataplane;

CREATE TABLE sign_in_throttle (
    key_hash        bytea       NOT NULL,
    failures        integer     NOT NULL,
    locked_until    timestamptz,
    last_failure_at timestamptz NOT NULL,
    PRIMARY KEY (key_hash)
);

CREATE INDEX sign_in_throttle_last_failure ON sign_in_throttle USING btree (last_failure_at);
