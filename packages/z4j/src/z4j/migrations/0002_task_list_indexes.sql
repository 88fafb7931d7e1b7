-- z4j: indexes for the task list's filters. Each serves "equality on one column, newest first"
-- so a filtered page is one short index walk (see z4j.store.tasks_read). Additions to the data
-- model's indexes, which stay as they are.

-- state = s, in created order (several states: one walk per state, merged).
CREATE INDEX tasks_project_state_created ON tasks (project_id, state, created_at DESC, id DESC);

-- name = n in created order; text_pattern_ops also serves the prefix form (name LIKE 'p%')
-- whatever the database collation.
CREATE INDEX tasks_project_name_created
    ON tasks (project_id, name text_pattern_ops, created_at DESC, id DESC);

CREATE INDEX tasks_project_queue_created ON tasks (project_id, queue, created_at DESC, id DESC);

CREATE INDEX tasks_project_agent_created
    ON tasks (project_id, agent_id, created_at DESC, id DESC);
