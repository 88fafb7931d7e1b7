-- Commands the brain sends to agents (retry, cancel, purge, rate limit, pool, restart) and
-- what became of each (docs/decisions/0028). One row per command; the lifecycle is
-- queued -> sent -> acknowledged -> succeeded | failed, or timed_out at the deadline.
CREATE TYPE command_status AS ENUM
    ('queued', 'sent', 'acknowledged', 'succeeded', 'failed', 'timed_out');

CREATE TABLE commands (
    id              uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    agent_id        uuid REFERENCES agents(id) ON DELETE SET NULL,
    task_id         uuid REFERENCES tasks(id) ON DELETE SET NULL,
    action          varchar(80) NOT NULL,
    target          jsonb NOT NULL DEFAULT '{}'::jsonb,
    parameters      jsonb NOT NULL DEFAULT '{}'::jsonb,
    status          command_status NOT NULL DEFAULT 'queued',
    result          jsonb,
    error           text,
    issued_by       uuid REFERENCES users(id) ON DELETE SET NULL,
    timeout_seconds integer NOT NULL CHECK (timeout_seconds BETWEEN 1 AND 3600),
    deadline_at     timestamptz NOT NULL,
    sent_at         timestamptz,
    acknowledged_at timestamptz,
    finished_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
-- What a connection claims: the oldest queued commands of its agent.
CREATE INDEX commands_queued ON commands (agent_id, created_at) WHERE status = 'queued';
-- What the timeout sweeper finds.
CREATE INDEX commands_open_deadline ON commands (deadline_at)
    WHERE status IN ('queued', 'sent', 'acknowledged');
CREATE INDEX commands_project_created ON commands (project_id, created_at);
CREATE INDEX commands_task ON commands (task_id) WHERE task_id IS NOT NULL;

ALTER TABLE commands ENABLE ROW LEVEL SECURITY;
ALTER TABLE commands FORCE ROW LEVEL SECURITY;
CREATE POLICY project_isolation ON commands USING (z4j_visible(project_id))
    WITH CHECK (z4j_visible(project_id));

-- A task's page names the task it retries: the reverse of tasks.retried_as.
CREATE INDEX tasks_retried_as ON tasks (retried_as) WHERE retried_as IS NOT NULL;

-- Bulk retries (docs/decisions/0028): the tasks a filter matched when the operator confirmed,
-- at most 1000, retried a window at a time by the commands controller. The state lives here,
-- so a bulk retry carries on after a brain restart.
CREATE TYPE bulk_status AS ENUM ('running', 'done', 'stopped');

CREATE TABLE bulk_retries (
    id          uuid PRIMARY KEY,
    project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    filters     jsonb NOT NULL,
    task_ids    uuid[] NOT NULL CHECK (cardinality(task_ids) <= 1000),
    next_index  integer NOT NULL DEFAULT 0,
    status      bulk_status NOT NULL DEFAULT 'running',
    error       text,
    created_by  uuid REFERENCES users(id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX bulk_retries_running ON bulk_retries (created_at) WHERE status = 'running';
ALTER TABLE bulk_retries ENABLE ROW LEVEL SECURITY;
ALTER TABLE bulk_retries FORCE ROW LEVEL SECURITY;
CREATE POLICY project_isolation ON bulk_retries USING (z4j_visible(project_id))
    WITH CHECK (z4j_visible(project_id));

ALTER TABLE commands ADD COLUMN bulk_id uuid REFERENCES bulk_retries(id) ON DELETE SET NULL;
CREATE INDEX commands_bulk ON commands (bulk_id, status) WHERE bulk_id IS NOT NULL;
