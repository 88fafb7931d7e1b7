-- Two-factor sign-in by TOTP (docs/decisions/0035). Brain-wide like users: no project data.
-- ``secret`` is the TOTP secret sealed with AES-256-GCM under a key derived from the brain's
-- secrets (the user id is the associated data); ``last_step`` is the newest 30-second step a
-- code was accepted for, so a code works once. ``confirmed_at`` is NULL while enrolling.
CREATE TABLE user_mfa (
    user_id      uuid PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    secret       bytea NOT NULL,
    confirmed_at timestamptz,
    last_step    bigint,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One-time recovery codes: only their HMAC-SHA256 is stored; a used code keeps its row.
CREATE TABLE mfa_recovery_codes (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    code_hash  text NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, code_hash)
);
