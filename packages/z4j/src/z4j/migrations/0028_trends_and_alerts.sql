-- Trends and alerts (docs/decisions/0043, docs/z4j/trends-and-alerts.md).
--
-- Trends are read from tasks as they are: each chart is one aggregate over the finished tasks
-- of a project in a window. This index finds them by finish time and carries what the charts
-- group and measure, so the aggregate reads the index alone where the heap pages are settled.
CREATE INDEX tasks_project_finished ON tasks (project_id, finished_at)
    INCLUDE (state, runtime_ms, name, queue) WHERE finished_at IS NOT NULL;

-- addition: what to watch and whom to tell. kind decides what value is compared with
-- threshold (a percentage, seconds, or a count); task_name, queue and agent_name narrow it.
CREATE TABLE alert_rules (
    id             uuid PRIMARY KEY,
    project_id     uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name           varchar(200) NOT NULL,
    kind           varchar(40) NOT NULL CHECK (kind IN
                       ('failure_rate', 'runtime_p95', 'queue_depth', 'backlog_age', 'agent_offline',
                        'worker_offline')),
    task_name      varchar(500),
    queue          varchar(200),
    agent_name     varchar(200),
    threshold      double precision NOT NULL CHECK (threshold >= 0),
    window_seconds integer NOT NULL CHECK (window_seconds BETWEEN 60 AND 604800),
    min_tasks      integer NOT NULL DEFAULT 1 CHECK (min_tasks BETWEEN 1 AND 1000000),
    webhook_url    varchar(2000),
    emails         text[] NOT NULL DEFAULT '{}',
    enabled        boolean NOT NULL DEFAULT true,
    created_by     uuid REFERENCES users(id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);

-- addition: each time a rule's value went over its threshold, until it came back. At most one
-- open firing per rule, so a firing is announced once however many replicas evaluate.
-- notices: {"firing": {"webhook": ts, "email": ts}, "resolved": {...}}, what was delivered.
CREATE TABLE alert_firings (
    id          uuid PRIMARY KEY,
    rule_id     uuid NOT NULL REFERENCES alert_rules(id) ON DELETE CASCADE,
    project_id  uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    started_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    value       double precision NOT NULL,       -- the value that fired it
    last_value  double precision,                -- the latest value evaluated
    notices     jsonb NOT NULL DEFAULT '{}'::jsonb,
    owed        boolean NOT NULL DEFAULT true,   -- a notice is still to be delivered
    attempts    integer NOT NULL DEFAULT 0,      -- delivery rounds that failed somewhere
    last_error  varchar(500)
);
CREATE UNIQUE INDEX alert_firings_open ON alert_firings (rule_id) WHERE resolved_at IS NULL;
CREATE INDEX alert_firings_owed ON alert_firings (started_at) WHERE owed;
CREATE INDEX alert_firings_project_started ON alert_firings (project_id, started_at DESC);

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['alert_rules', 'alert_firings'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY project_isolation ON %I USING (z4j_visible(project_id)) '
                       'WITH CHECK (z4j_visible(project_id))', t);
    END LOOP;
END $$;
