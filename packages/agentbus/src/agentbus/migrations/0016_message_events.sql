-- Message events (data model §2.3): every transition of a message, kept so that its trace tells
-- the whole story, a redrive included (docs/decisions/0047). The model keeps `events` in
-- ClickHouse; this deployment runs no ClickHouse, so, as with usage (decisions/0031), the table
-- lives here with the model's columns and the nearest types: UUID -> uuid, DateTime64 and
-- DateTime -> timestamptz, LowCardinality(String) and String -> text, UInt8 -> smallint,
-- UInt32 -> bigint, details (JSON in a String) -> jsonb. retention_days (MATERIALIZED from the
-- tenant) is not a column: the retention job deletes a message's events with the message.
--
-- The rows are written by triggers on messages and delivery_state, in the statement that makes
-- the change: one INSERT per statement (transition tables), never a round trip of its own.
-- latency_ms is left NULL here (it needs the message's previous event, an index probe per row
-- on the hot path); the trace computes it when it reads the events.

CREATE TABLE events (
    event_id        uuid NOT NULL DEFAULT uuidv7(),
    event_time      timestamptz NOT NULL DEFAULT now(),
    event           text NOT NULL,                  -- message.accepted, message.delivered ...
    tenant_id       uuid NOT NULL,
    workspace_id    uuid NOT NULL,
    message_id      uuid NOT NULL,
    conversation_id uuid NOT NULL,
    task_id         uuid,
    trace_id        text NOT NULL,
    span_id         text NOT NULL,
    from_agent_id   uuid NOT NULL,
    to_agent_id     uuid,
    type            text NOT NULL,                  -- envelope type
    capability      text,
    attempt         smallint NOT NULL DEFAULT 0,
    actor           text NOT NULL,                  -- gateway, sidecar, dlq_worker, api
    payload_bytes   bigint NOT NULL,
    latency_ms      bigint,
    error_code      text,
    policy_id       uuid,
    bridged_from    uuid,
    details         jsonb NOT NULL DEFAULT '{}'::jsonb,
    ingested_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, message_id, event_id)   -- a message's events, in the order written
);

ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON events
    USING (tenant_id = current_tenant_id()) WITH CHECK (tenant_id = current_tenant_id());
CREATE POLICY support_read ON events FOR SELECT TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = events.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
CREATE POLICY support_consent_required ON events AS RESTRICTIVE TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = events.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
-- History: the gateway adds events and the retention job deletes them; nobody rewrites one.
REVOKE UPDATE ON events FROM agentbus_app;
GRANT SELECT ON events TO agentbus_support;

-- A new message: message.accepted, at its accepted_at.
CREATE FUNCTION message_events_accepted() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
AS $$
BEGIN
    INSERT INTO public.events (event_time, event, tenant_id, workspace_id, message_id,
                               conversation_id, task_id, trace_id, span_id, from_agent_id,
                               to_agent_id, type, capability, attempt, actor, payload_bytes,
                               bridged_from)
    SELECT n.accepted_at, 'message.accepted', n.tenant_id, n.workspace_id, n.id,
           n.conversation_id,
           CASE WHEN n.type = 'agentbus.task.request.v1' THEN n.id END,
           n.trace_id, split_part(n.traceparent, '-', 3), n.from_agent_id, n.to_agent_id,
           n.type, n.capability, 0, 'gateway', n.payload_bytes, n.bridged_from
      FROM new_rows n;
    RETURN NULL;
END
$$;

-- A changed message: the steps its new row proves against its old one. Publishing fills
-- stream_seq; a redrive moves dead_lettered -> accepted with the new copy's sequence; a fetch
-- moves to fetched or counts another attempt; the acks fill delivered_at and read_at; the
-- sweepers and policy move to expired and discarded (a discard by policy names its code and
-- policy in the settings agentbus.event_error and agentbus.event_policy, set around its
-- statement by delivery/outcomes.py). Dead-lettering and naks are delivery_state's
-- (below), where their reason and delay are. The attempt is the recipient's delivery_state one:
-- messages.attempts keeps the highest count of every copy, and a redrive's copy counts anew.
-- The batch updates of delivery/store.py run with index scans off, so the function turns them on
-- for its probe of delivery_state's key.
CREATE FUNCTION message_events_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET enable_indexscan = on SET enable_bitmapscan = on
AS $$
BEGIN
    INSERT INTO public.events (event_time, event, tenant_id, workspace_id, message_id,
                               conversation_id, task_id, trace_id, span_id, from_agent_id,
                               to_agent_id, type, capability, attempt, actor, payload_bytes,
                               bridged_from, details, error_code, policy_id)
    SELECT e.at, e.event, n.tenant_id, n.workspace_id, n.id, n.conversation_id,
           CASE WHEN n.type = 'agentbus.task.request.v1' THEN n.id END,
           n.trace_id, split_part(n.traceparent, '-', 3), n.from_agent_id, n.to_agent_id,
           n.type, n.capability,
           CASE WHEN e.counted THEN LEAST(COALESCE(d.attempt, n.attempts), 32767) ELSE 0 END,
           e.actor, n.payload_bytes, n.bridged_from, e.details,
           CASE WHEN e.event = 'message.discarded'
                THEN NULLIF(current_setting('agentbus.event_error', true), '') END,
           CASE WHEN e.event = 'message.discarded'
                THEN NULLIF(current_setting('agentbus.event_policy', true), '')::uuid END
      FROM new_rows n
      JOIN old_rows o ON o.tenant_id = n.tenant_id AND o.id = n.id
                     AND o.accepted_at = n.accepted_at
     CROSS JOIN LATERAL (VALUES
        (CASE WHEN o.status = 'dead_lettered' AND n.status = 'accepted'
              THEN 'message.redriven' END,
         now(), 'api', false, jsonb_build_object('stream_seq', n.stream_seq)),
        (CASE WHEN o.stream_seq IS NULL AND n.stream_seq IS NOT NULL
              THEN 'message.published' END,
         now(), 'gateway', false, jsonb_build_object('stream_seq', n.stream_seq)),
        (CASE WHEN n.status = 'fetched' AND (o.status <> 'fetched' OR n.attempts <> o.attempts)
              THEN 'message.fetched' END,
         now(), 'gateway', true, '{}'::jsonb),
        (CASE WHEN o.delivered_at IS NULL AND n.delivered_at IS NOT NULL
              THEN 'message.delivered' END,
         n.delivered_at, 'sidecar', true, '{}'::jsonb),
        (CASE WHEN o.read_at IS NULL AND n.read_at IS NOT NULL THEN 'message.read' END,
         n.read_at, 'sidecar', true, '{}'::jsonb),
        (CASE WHEN o.status <> n.status AND n.status IN ('expired', 'discarded')
              THEN 'message.' || n.status::text END,
         now(), 'gateway', true, '{}'::jsonb)
     ) AS e(event, at, actor, counted, details)
      LEFT JOIN LATERAL (
          SELECT d0.attempt FROM public.delivery_state d0
           WHERE d0.msg_id = n.id AND d0.agent_id = n.to_agent_id AND e.counted
          OFFSET 0) AS d ON true
     WHERE e.event IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_events_accepted AFTER INSERT ON messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION message_events_accepted();
CREATE TRIGGER message_events_changed AFTER UPDATE ON messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION message_events_changed();

-- A nak (nak_until set anew, with its delay) and a dead-lettering (dlq_reason filled, with the
-- reason), from the recipient's delivery_state row. The acks of a pull write delivery_state
-- with index scans off (delivery/store.py), so the function turns them on for its own lookup of
-- the message, and looks only when a row qualifies.
CREATE FUNCTION delivery_events() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER
SET enable_indexscan = on SET enable_bitmapscan = on
AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM new_rows n JOIN old_rows o ON o.msg_id = n.msg_id AND o.agent_id = n.agent_id
         WHERE (n.nak_until IS NOT NULL AND n.nak_until IS DISTINCT FROM o.nak_until)
            OR (n.dlq_reason IS NOT NULL AND o.dlq_reason IS NULL)) THEN
        RETURN NULL;
    END IF;
    INSERT INTO public.events (event, tenant_id, workspace_id, message_id, conversation_id,
                               task_id, trace_id, span_id, from_agent_id, to_agent_id, type,
                               capability, attempt, actor, payload_bytes, bridged_from, details)
    SELECT e.event, m.tenant_id, m.workspace_id, m.id, m.conversation_id,
           CASE WHEN m.type = 'agentbus.task.request.v1' THEN m.id END,
           m.trace_id, split_part(m.traceparent, '-', 3), m.from_agent_id, m.to_agent_id,
           m.type, m.capability, LEAST(n.attempt, 32767), e.actor, m.payload_bytes,
           m.bridged_from, e.details
      FROM new_rows n
      JOIN old_rows o ON o.msg_id = n.msg_id AND o.agent_id = n.agent_id
     CROSS JOIN LATERAL (VALUES
        (CASE WHEN n.nak_until IS NOT NULL AND n.nak_until IS DISTINCT FROM o.nak_until
              THEN 'message.nak' END,
         'sidecar', jsonb_build_object('nak_until', n.nak_until)),
        (CASE WHEN n.dlq_reason IS NOT NULL AND o.dlq_reason IS NULL
              THEN 'message.dead_lettered' END,
         'dlq_worker', jsonb_build_object('reason', n.dlq_reason))
     ) AS e(event, actor, details)
     CROSS JOIN LATERAL (
        SELECT * FROM public.messages m0 WHERE m0.tenant_id = n.tenant_id AND m0.id = n.msg_id
        OFFSET 0) AS m
     WHERE e.event IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER delivery_events AFTER UPDATE ON delivery_state
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_events();

-- Messages accepted before this migration: the steps their rows prove, tenant by tenant (row
-- security holds the owner to one tenant at a time).
DO $backfill$
DECLARE
    t uuid;
BEGIN
    FOR t IN SELECT id FROM platform_tenants() LOOP
        PERFORM set_config('app.tenant_id', t::text, true);
        INSERT INTO events (event_time, event, tenant_id, workspace_id, message_id,
                            conversation_id, task_id, trace_id, span_id, from_agent_id,
                            to_agent_id, type, capability, attempt, actor, payload_bytes,
                            bridged_from, details)
        SELECT e.at, e.event, m.tenant_id, m.workspace_id, m.id, m.conversation_id,
               CASE WHEN m.type = 'agentbus.task.request.v1' THEN m.id END,
               m.trace_id, split_part(m.traceparent, '-', 3), m.from_agent_id, m.to_agent_id,
               m.type, m.capability, LEAST(m.attempts, 32767), e.actor, m.payload_bytes,
               m.bridged_from, e.details
          FROM messages m
         CROSS JOIN LATERAL (VALUES
            ('message.accepted', m.accepted_at, 'gateway', '{}'::jsonb),
            (CASE WHEN m.stream_seq IS NOT NULL THEN 'message.published' END, m.accepted_at,
             'gateway', jsonb_build_object('stream_seq', m.stream_seq)),
            (CASE WHEN m.delivered_at IS NOT NULL THEN 'message.delivered' END, m.delivered_at,
             'sidecar', '{}'::jsonb),
            (CASE WHEN m.read_at IS NOT NULL THEN 'message.read' END, m.read_at, 'sidecar',
             '{}'::jsonb)
         ) AS e(event, at, actor, details)
         WHERE m.tenant_id = t AND e.event IS NOT NULL;
    END LOOP;
    PERFORM set_config('app.tenant_id', '', true);
END
$backfill$;
