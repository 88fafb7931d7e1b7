-- z4j: the brain's tables, as in the data model (docs/z4j/schema.md is generated from this).
-- Additions where the model is silent are marked "addition".

CREATE TYPE membership_role AS ENUM ('owner', 'admin', 'operator', 'viewer');
CREATE TYPE agent_state AS ENUM ('online', 'offline', 'unknown');
CREATE TYPE task_state AS ENUM ('pending', 'started', 'succeeded', 'failed', 'cancelled', 'retried', 'lost');
CREATE TYPE schedule_type AS ENUM ('cron', 'interval', 'date');

CREATE TABLE projects (
    id         uuid PRIMARY KEY,
    name       varchar(200) NOT NULL UNIQUE,
    settings   jsonb NOT NULL DEFAULT '{}'::jsonb,   -- retention, redaction overrides, tz
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id            uuid PRIMARY KEY,
    -- Stored normalized (trimmed, lower case) so uniqueness is case-insensitive like citext.
    email         varchar(320) NOT NULL UNIQUE CHECK (email = lower(btrim(email))),
    display_name  varchar(200),
    password_hash text NOT NULL,                    -- argon2id PHC string
    is_active     boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- addition: brain administrators create projects and users; everything else is by role
    is_admin      boolean NOT NULL DEFAULT false
);

CREATE TABLE memberships (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    role       membership_role NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, project_id)
);

CREATE TABLE agents (
    id                 uuid PRIMARY KEY,
    project_id         uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name               varchar(200) NOT NULL,
    token_hash         text NOT NULL UNIQUE,         -- HMAC-SHA256 under the brain's key
    protocol_version   varchar(20),
    framework_adapter  varchar(40),
    engine_adapters    text[] NOT NULL DEFAULT '{}',
    scheduler_adapters text[] NOT NULL DEFAULT '{}',
    capabilities       jsonb NOT NULL DEFAULT '{}'::jsonb,
    state              agent_state NOT NULL DEFAULT 'unknown',
    last_seen_at       timestamptz,
    last_connect_at    timestamptz,
    metadata           jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);
CREATE INDEX agents_project_state ON agents (project_id, state);
CREATE INDEX agents_last_seen ON agents (last_seen_at);

CREATE TABLE tasks (
    id              uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    agent_id        uuid REFERENCES agents(id) ON DELETE SET NULL,
    engine          varchar(40) NOT NULL,
    name            varchar(500),
    queue           varchar(200),
    state           task_state NOT NULL DEFAULT 'pending',
    args_redacted   jsonb,
    kwargs_redacted jsonb,
    error           jsonb,                            -- {exc_type, exc_msg, traceback_redacted}
    retried_as      uuid REFERENCES tasks(id),
    group_id        varchar(200),
    enqueued_at     timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- addition: the agent clock of the event that set the state, so late events never win
    state_at        timestamptz,
    -- addition: the engine's own task id (Celery's), shown to people and used for commands
    engine_task_id  varchar(200),
    -- addition: worker hostname and runtime, for the task list and detail
    worker          varchar(200),
    runtime_ms      double precision,
    retries         integer NOT NULL DEFAULT 0
);
CREATE INDEX tasks_project_state ON tasks (project_id, state);
CREATE INDEX tasks_project_name ON tasks (project_id, name);
CREATE INDEX tasks_enqueued ON tasks (enqueued_at);
-- addition: the task list's default order and cursor (newest first within a project)
CREATE INDEX tasks_project_created ON tasks (project_id, created_at DESC, id DESC);

CREATE TABLE events (
    id         uuid PRIMARY KEY,
    task_id    uuid NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    agent_id   uuid REFERENCES agents(id) ON DELETE SET NULL,
    event_type varchar(40) NOT NULL
        CHECK (event_type IN ('task_sent', 'started', 'succeeded', 'failed', 'retry', 'cancelled', 'expired')),
    ts         timestamptz NOT NULL,                 -- from the agent's clock
    payload    jsonb NOT NULL DEFAULT '{}'::jsonb,   -- redacted event data
    created_at timestamptz NOT NULL DEFAULT now(),   -- brain receipt time
    project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE   -- addition: row-level security
);
CREATE INDEX events_task_ts ON events (task_id, ts);

CREATE TABLE schedules (
    id            uuid PRIMARY KEY,
    project_id    uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    agent_id      uuid REFERENCES agents(id) ON DELETE SET NULL,
    scheduler     varchar(40) NOT NULL,
    name          varchar(200) NOT NULL,
    task          varchar(500) NOT NULL,
    schedule_type schedule_type NOT NULL,
    expression    varchar(200) NOT NULL,             -- cron string or interval spec
    args          jsonb NOT NULL DEFAULT '[]'::jsonb,
    kwargs        jsonb NOT NULL DEFAULT '{}'::jsonb,
    enabled       boolean NOT NULL DEFAULT true,
    last_run_at   timestamptz,
    next_run_at   timestamptz,
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_log (
    id            uuid PRIMARY KEY,                  -- time-ordered (UUIDv7)
    ts            timestamptz NOT NULL DEFAULT now(),
    actor_user_id uuid,                              -- NULL for system events
    project_id    uuid,                              -- NULL for global events
    action        varchar(100) NOT NULL,             -- e.g. task.retry
    target_type   varchar(40),
    target_id     uuid,
    details       jsonb NOT NULL DEFAULT '{}'::jsonb,
    row_hmac      varchar(64) NOT NULL,              -- hex HMAC-SHA256 over the chain
    prev_row_hmac varchar(64)                        -- NULL for the genesis row
);
CREATE INDEX audit_log_project_ts ON audit_log (project_id, ts);
CREATE INDEX audit_log_action ON audit_log (action);

CREATE TABLE sessions (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,                 -- sliding, 14 days
    data       jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE invitations (
    id          uuid PRIMARY KEY,
    project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    email       varchar(320) NOT NULL,
    role        membership_role NOT NULL,
    token_hash  text NOT NULL UNIQUE,                -- HMAC-SHA256
    expires_at  timestamptz NOT NULL,                -- 72 h from creation
    accepted_at timestamptz,
    created_by  uuid REFERENCES users(id),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE password_reset_tokens (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash text NOT NULL UNIQUE,
    expires_at timestamptz NOT NULL,                 -- 60 min
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The rank that breaks ties between two state claims at the same agent time (see
-- z4j.domain.taskstate, which states the same rule in Python).
CREATE FUNCTION z4j_state_rank(s task_state) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE s WHEN 'pending' THEN 0 WHEN 'started' THEN 1 WHEN 'retried' THEN 2
                  WHEN 'lost' THEN 3 WHEN 'cancelled' THEN 4 WHEN 'failed' THEN 5
                  WHEN 'succeeded' THEN 6 END
$$;

-- Row-level security on the data plane: a transaction sees one project (z4j.project), or all
-- of them on platform code paths (z4j.scope = 'platform': token lookup, sweepers).
CREATE FUNCTION z4j_visible(project uuid) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT project = NULLIF(current_setting('z4j.project', true), '')::uuid
        OR current_setting('z4j.scope', true) = 'platform'
$$;

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['agents', 'tasks', 'events', 'schedules'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY project_isolation ON %I USING (z4j_visible(project_id)) '
                       'WITH CHECK (z4j_visible(project_id))', t);
    END LOOP;
END $$;

-- The audit log is append-only for the application.
REVOKE UPDATE, DELETE ON audit_log FROM z4j_app;
