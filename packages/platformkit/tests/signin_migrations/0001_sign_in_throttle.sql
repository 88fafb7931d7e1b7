-- The kernel's test copy of the sign-in throttle table each system keeps in its own schema.
CREATE SCHEMA signinkit;

CREATE TABLE signinkit.sign_in_throttle (
    key_hash        bytea       PRIMARY KEY,
    failures        integer     NOT NULL,
    locked_until    timestamptz,
    last_failure_at timestamptz NOT NULL
);

CREATE INDEX sign_in_throttle_last_failure ON signinkit.sign_in_throttle (last_failure_at);
