-- Message events reach ClickHouse from `events` (migration 0016) instead of a second copy queued
-- by triggers of their own (migration 0021). Both sets of triggers derived the same steps from
-- the same rows, and the analytics ones built a JSON document per event inside the statements of
-- the send, pull and read paths: about a third of PostgreSQL's time per message at 500 msg/s
-- (docs/agentbus/analytics.md). The ingester now reads each tenant's `events` rows in `event_id`
-- order after a cursor, up to a horizon that no transaction still running can write below
-- (agentbus.analytics.horizon), so a transaction that commits late is never passed over. Task
-- transitions and usage keep the outbox: they are few, and their rows are not in `events`.

DROP TRIGGER analytics_messages_inserted ON messages;
DROP TRIGGER analytics_messages_updated ON messages;
DROP FUNCTION analytics_messages_inserted();
DROP FUNCTION analytics_messages_updated();

-- The trace history now feeds analytics, so it records what only the analytics triggers did:
-- a message bridged to another bus, and a dead letter's reason as its error code.
CREATE OR REPLACE FUNCTION message_events_changed() RETURNS trigger
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
        (CASE WHEN o.status <> n.status AND n.status IN ('expired', 'discarded', 'bridged')
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

CREATE OR REPLACE FUNCTION delivery_events() RETURNS trigger
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
                               capability, attempt, actor, payload_bytes, bridged_from, details,
                               error_code)
    SELECT e.event, m.tenant_id, m.workspace_id, m.id, m.conversation_id,
           CASE WHEN m.type = 'agentbus.task.request.v1' THEN m.id END,
           m.trace_id, split_part(m.traceparent, '-', 3), m.from_agent_id, m.to_agent_id,
           m.type, m.capability, LEAST(n.attempt, 32767), e.actor, m.payload_bytes,
           m.bridged_from, e.details, e.error_code
      FROM new_rows n
      JOIN old_rows o ON o.msg_id = n.msg_id AND o.agent_id = n.agent_id
     CROSS JOIN LATERAL (VALUES
        (CASE WHEN n.nak_until IS NOT NULL AND n.nak_until IS DISTINCT FROM o.nak_until
              THEN 'message.nak' END,
         'sidecar', jsonb_build_object('nak_until', n.nak_until), NULL::text),
        (CASE WHEN n.dlq_reason IS NOT NULL AND o.dlq_reason IS NULL
              THEN 'message.dead_lettered' END,
         'dlq_worker', jsonb_build_object('reason', n.dlq_reason), n.dlq_reason)
     ) AS e(event, actor, details, error_code)
     CROSS JOIN LATERAL (
        SELECT * FROM public.messages m0 WHERE m0.tenant_id = n.tenant_id AND m0.id = n.msg_id
        OFFSET 0) AS m
     WHERE e.event IS NOT NULL;
    RETURN NULL;
END
$$;

-- A tenant's events in the order they were written (event_id is a UUIDv7 drawn at insert).
CREATE INDEX events_tenant_written ON events (tenant_id, event_id);

-- Addition: how far each tenant's events have been handed to ClickHouse.
CREATE TABLE analytics_event_cursors (
    tenant_id   uuid PRIMARY KEY,
    event_id    uuid NOT NULL,                     -- the last events row ClickHouse holds
    updated_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE analytics_event_cursors ENABLE ROW LEVEL SECURITY;
ALTER TABLE analytics_event_cursors FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON analytics_event_cursors
    USING (tenant_id = current_tenant_id()) WITH CHECK (tenant_id = current_tenant_id());
CREATE POLICY support_read ON analytics_event_cursors FOR SELECT TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = analytics_event_cursors.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
CREATE POLICY support_consent_required ON analytics_event_cursors AS RESTRICTIVE
    TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = analytics_event_cursors.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
CREATE POLICY platform_lookup ON analytics_event_cursors FOR SELECT TO agentbus_owner
    USING (current_setting('agentbus.lookup', true) = 'on');
CREATE POLICY platform_lookup ON events FOR SELECT TO agentbus_owner
    USING (current_setting('agentbus.lookup', true) = 'on');
GRANT SELECT, INSERT, UPDATE ON analytics_event_cursors TO agentbus_app;
GRANT SELECT ON analytics_event_cursors TO agentbus_support;

-- The tenants with events after their cursor and before `before`, with that cursor (the nil
-- UUID for a tenant never drained), for the ingester's pass. Each tenant costs one probe of
-- events_tenant_written: the bounds are plain columns and parameters, so row security lets them
-- into the index condition (an expression such as COALESCE over the cursor would be kept
-- behind the policies' filter, and the probe would read every row of the tenant).
CREATE FUNCTION analytics_event_tenants(before uuid)
RETURNS TABLE (tenant_id uuid, after uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    PERFORM set_config('agentbus.lookup', 'on', true);
    RETURN QUERY
        SELECT t.id, c.event_id
          FROM tenants t JOIN analytics_event_cursors c ON c.tenant_id = t.id
         WHERE (SELECT e.event_id FROM events e
                 WHERE e.tenant_id = t.id AND e.event_id > c.event_id AND e.event_id < before
                 ORDER BY e.tenant_id, e.event_id LIMIT 1) IS NOT NULL
        UNION ALL
        SELECT t.id, '00000000-0000-0000-0000-000000000000'::uuid
          FROM tenants t
         WHERE NOT EXISTS (SELECT 1 FROM analytics_event_cursors c WHERE c.tenant_id = t.id)
           AND (SELECT e.event_id FROM events e
                 WHERE e.tenant_id = t.id AND e.event_id < before
                 ORDER BY e.tenant_id, e.event_id LIMIT 1) IS NOT NULL;
    PERFORM set_config('agentbus.lookup', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION analytics_event_tenants(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analytics_event_tenants(uuid) TO agentbus_app;

-- Events written before this migration were queued in the outbox by the triggers dropped above,
-- so every existing tenant starts after them.
DO $cursors$
DECLARE
    t uuid;
BEGIN
    FOR t IN SELECT id FROM platform_tenants() LOOP
        PERFORM set_config('app.tenant_id', t::text, true);
        INSERT INTO analytics_event_cursors (tenant_id, event_id)
        SELECT t, COALESCE(max(e.event_id), '00000000-0000-0000-0000-000000000000'::uuid)
          FROM events e WHERE e.tenant_id = t;
    END LOOP;
    PERFORM set_config('app.tenant_id', '', true);
END
$cursors$;
