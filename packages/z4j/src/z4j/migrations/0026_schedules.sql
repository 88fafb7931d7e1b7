-- Schedules run by the brain's beat scheduler (docs/decisions/0042, docs/z4j/schedules.md).
--
-- A schedule's name is its handle in the dashboard, the CLI and the beat's log: one per project.
CREATE UNIQUE INDEX schedules_project_name ON schedules (project_id, name);

-- What a beat process reads on every sync: the project's enabled schedules.
CREATE INDEX schedules_project_enabled ON schedules (project_id) WHERE enabled;

-- A schedule's times are checked where they are written as well: a date schedule has no next
-- run once it fired, and a disabled schedule has none at all.
ALTER TABLE schedules ADD CONSTRAINT schedules_disabled_no_next
    CHECK (enabled OR next_run_at IS NULL);
