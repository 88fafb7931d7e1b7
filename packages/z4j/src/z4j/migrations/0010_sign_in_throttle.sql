-- Failed sign-ins per account and per source address (platformkit.signin, docs/decisions/0025):
-- keys are SHA-256 digests, never the emails or addresses themselves. Brain-wide, like users:
-- no project data, no row security.
CREATE TABLE sign_in_throttle (
    key_hash        bytea       NOT NULL,
    failures        integer     NOT NULL,
    locked_until    timestamptz,
    last_failure_at timestamptz NOT NULL,
    PRIMARY KEY (key_hash)
);

CREATE INDEX sign_in_throttle_last_failure ON sign_in_throttle USING btree (last_failure_at);
