-- Lost tasks (docs/decisions/0030): the brain marks a started task lost when the worker that
-- reported it has been silent past a grace period, and restores it when that worker says it
-- still runs the task.

-- The agent worker (the hello's worker_id) whose event set the task's current state: the
-- connection whose silence makes the task lost.
ALTER TABLE tasks ADD COLUMN state_worker_id varchar(128);

-- Started tasks are the only candidates; the sweep reads them without scanning the table.
CREATE INDEX tasks_started ON tasks (updated_at) WHERE state = 'started';

-- One row per worker connection of an agent (agents share a token across workers): when the
-- brain last heard from it, and the engine task ids it last reported running (null when the
-- agent does not report them).
CREATE TABLE agent_workers (
    agent_id           uuid NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    worker_id          varchar(128) NOT NULL,
    project_id         uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    connected          boolean NOT NULL DEFAULT true,
    last_seen_at       timestamptz NOT NULL,
    active_task_ids    text[],
    active_reported_at timestamptz,
    PRIMARY KEY (agent_id, worker_id)
);
CREATE INDEX agent_workers_project ON agent_workers (project_id);
ALTER TABLE agent_workers ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_workers FORCE ROW LEVEL SECURITY;
CREATE POLICY project_isolation ON agent_workers USING (z4j_visible(project_id))
    WITH CHECK (z4j_visible(project_id));

-- The brain's own timeline row for a task it marks lost.
ALTER TABLE events DROP CONSTRAINT events_event_type_check;
ALTER TABLE events ADD CONSTRAINT events_event_type_check CHECK (event_type IN
    ('task_sent', 'started', 'succeeded', 'failed', 'retry', 'cancelled', 'expired', 'lost'));
