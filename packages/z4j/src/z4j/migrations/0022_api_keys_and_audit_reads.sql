-- API keys (docs/decisions/0034): a user's bearer credential for one project, with a role no
-- higher than theirs (and capped at their current role whenever it is used). Only the key's
-- HMAC-SHA256 is stored; ``prefix`` is the public start of the key, shown in lists.
CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    project_id   uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name         varchar(200) NOT NULL,
    role         membership_role NOT NULL,
    token_hash   text NOT NULL UNIQUE,
    prefix       varchar(20) NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX api_keys_user ON api_keys USING btree (user_id, created_at);
CREATE INDEX api_keys_project ON api_keys USING btree (project_id);

-- Tenant data like agents: a transaction sees one project's keys, or all on platform paths
-- (the bearer lookup, a user's own list across projects).
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY project_isolation ON api_keys USING (z4j_visible(project_id))
    WITH CHECK (z4j_visible(project_id));

-- Audit reads (docs/z4j/audit.md): pages are keyset by id, newest first, filtered by project
-- or actor; with these an empty or sparse combination does not walk the whole log.
CREATE INDEX audit_log_project_id ON audit_log USING btree (project_id, id);
CREATE INDEX audit_log_actor_id ON audit_log USING btree (actor_user_id, id);
CREATE INDEX audit_log_target ON audit_log USING btree (target_id, id);
