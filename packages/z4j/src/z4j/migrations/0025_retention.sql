-- Per-project retention (docs/decisions/0040, docs/z4j/retention.md).
--
-- Events expire by brain receipt time: a BRIN index on events.created_at finds the old block
-- ranges of this insert-only table at almost no cost to ingest (one summary per 128 pages,
-- not an entry per row). Tasks expire by created_at through tasks_project_created.
CREATE INDEX events_created_brin ON events USING brin (created_at);

-- Deleting a task checks tasks.retried_as for rows that name it: tasks_retried_as (0020)
-- is the index that keeps that check from scanning every task per row deleted.

-- What the retention controller did last for each project: shown on the settings page and API.
CREATE TABLE project_retention (
    project_id     uuid PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    last_run_at    timestamptz NOT NULL,
    tasks_deleted  bigint NOT NULL DEFAULT 0,   -- by the last run
    events_deleted bigint NOT NULL DEFAULT 0,   -- by the last run
    backlog        bigint NOT NULL DEFAULT 0,   -- expired rows left when the run stopped
    total_deleted  bigint NOT NULL DEFAULT 0    -- tasks and events, every run so far
);
ALTER TABLE project_retention ENABLE ROW LEVEL SECURITY;
ALTER TABLE project_retention FORCE ROW LEVEL SECURITY;
CREATE POLICY project_isolation ON project_retention USING (z4j_visible(project_id))
    WITH CHECK (z4j_visible(project_id));
