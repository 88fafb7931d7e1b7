-- Sessions of the agents' HTTP fallback (long poll), shared by every brain replica
-- (docs/decisions/0041). A request may reach any brain: the session's sequence counters and
-- the nonces it has used live here, and each check or reservation is one atomic statement.
CREATE TABLE agent_http_sessions (
    agent_id    uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    -- the brain's id from hello_ack ('hello'), or the agent's X-Z4J-Session-Nonce ('nonce')
    session_id  varchar(64) NOT NULL,
    project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    dialect     varchar(8) NOT NULL CHECK (dialect IN ('hello', 'nonce')),
    token_hash  text NOT NULL,
    worker_id   varchar(128) NOT NULL DEFAULT '',
    out_seq     bigint NOT NULL DEFAULT 0 CHECK (out_seq >= 0),  -- last seq the brain signed
    in_seq      bigint NOT NULL DEFAULT 0 CHECK (in_seq >= 0),   -- last seq taken from the agent
    closed_code integer,                                         -- 4002 once a newer hello replaced it
    created_at  timestamptz NOT NULL DEFAULT now(),
    used_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, session_id)
);
-- Our agent names its session by the id alone (X-Z4J-Session).
CREATE UNIQUE INDEX agent_http_sessions_hello ON agent_http_sessions (session_id)
    WHERE dialect = 'hello';
-- What a newer hello of the same worker replaces.
CREATE INDEX agent_http_sessions_worker ON agent_http_sessions (agent_id, worker_id)
    WHERE dialect = 'hello' AND closed_code IS NULL;
-- What the sweeper deletes once idle.
CREATE INDEX agent_http_sessions_used ON agent_http_sessions (used_at);
ALTER TABLE agent_http_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_http_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY project_isolation ON agent_http_sessions USING (z4j_visible(project_id))
    WITH CHECK (z4j_visible(project_id));

-- The nonces of a session's inbound frames within the protocol's nonce memory (180 s).
CREATE TABLE agent_http_nonces (
    agent_id    uuid NOT NULL,
    session_id  varchar(64) NOT NULL,
    nonce       varchar(32) NOT NULL,
    project_id  uuid NOT NULL,
    seen_at     timestamptz NOT NULL,
    PRIMARY KEY (agent_id, session_id, nonce),
    FOREIGN KEY (agent_id, session_id) REFERENCES agent_http_sessions (agent_id, session_id)
        ON DELETE CASCADE
);
CREATE INDEX agent_http_nonces_seen ON agent_http_nonces (seen_at);
ALTER TABLE agent_http_nonces ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_http_nonces FORCE ROW LEVEL SECURITY;
CREATE POLICY project_isolation ON agent_http_nonces USING (z4j_visible(project_id))
    WITH CHECK (z4j_visible(project_id));
