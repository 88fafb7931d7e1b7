-- events.project_id (our addition, for row-level security) no longer references projects.
--
-- The data model's own keys already tie an event to its project: events.task_id references
-- tasks ON DELETE CASCADE and tasks.project_id references projects ON DELETE CASCADE, so
-- deleting a project still deletes its events; ingest writes an event's project_id from the
-- same project as its task's id, and row-level security checks it on every write. The foreign
-- key added nothing but a check per event, which locked the project's row in every ingesting
-- transaction at once.
ALTER TABLE events DROP CONSTRAINT events_project_id_fkey;
