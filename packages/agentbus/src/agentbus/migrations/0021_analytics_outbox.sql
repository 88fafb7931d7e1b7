-- The analytics outbox: every message, delivery, task and usage event the gateway records in
-- PostgreSQL is also queued here, in the same transaction, as the ClickHouse row it becomes
-- (data model §2.3 events, §2.4 usage). One owner process drains it into ClickHouse in batches
-- and deletes what it inserted (agentbus.analytics.ingest), so the backlog survives restarts and
-- a row reaches ClickHouse at least once; the ingester skips ids ClickHouse already holds.
-- Addition: the data model feeds ClickHouse from NATS (SYS_AUDIT); this deployment has no
-- such stream, and triggers see every write path, batched ones included (docs/decisions/0050).

CREATE TABLE analytics_outbox (
    tenant_id   uuid NOT NULL,
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    target      text NOT NULL CHECK (target IN ('events', 'usage')),
    row         jsonb NOT NULL,                    -- the ClickHouse row, column -> value
    queued_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, seq)
);

ALTER TABLE analytics_outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE analytics_outbox FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON analytics_outbox
    USING (tenant_id = current_tenant_id()) WITH CHECK (tenant_id = current_tenant_id());
CREATE POLICY support_read ON analytics_outbox FOR SELECT TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = analytics_outbox.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
CREATE POLICY support_consent_required ON analytics_outbox AS RESTRICTIVE TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = analytics_outbox.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
-- The triggers below run as the owner (SECURITY DEFINER) and queue rows for the tenant of the
-- row that changed, whatever scope the writing statement ran in.
CREATE POLICY queue_events ON analytics_outbox FOR INSERT TO agentbus_owner WITH CHECK (true);
CREATE POLICY platform_lookup ON analytics_outbox FOR SELECT TO agentbus_owner
    USING (current_setting('agentbus.lookup', true) = 'on');
GRANT SELECT, DELETE ON analytics_outbox TO agentbus_app;
REVOKE UPDATE ON analytics_outbox FROM agentbus_app;  -- a queued row is sent as it was queued
GRANT SELECT ON analytics_outbox TO agentbus_support;

-- Tenants with queued rows, for the ingester's pass (the rows are read in each tenant's scope).
CREATE FUNCTION analytics_outbox_tenants()
RETURNS TABLE (tenant_id uuid, queued bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    PERFORM set_config('agentbus.lookup', 'on', true);
    RETURN QUERY SELECT o.tenant_id, count(*) FROM analytics_outbox o GROUP BY o.tenant_id;
    PERFORM set_config('agentbus.lookup', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION analytics_outbox_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analytics_outbox_tenants() TO agentbus_app;

-- ClickHouse's DateTime64(3) text form, in UTC.
CREATE FUNCTION analytics_ts(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') $$;

-- Milliseconds from a to b, as a UInt32 (null when either is unknown).
CREATE FUNCTION analytics_ms(a timestamptz, b timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT LEAST(GREATEST((EXTRACT(EPOCH FROM b - a) * 1000)::bigint, 0), 4294967295)
$$;

-- The creation time a UUIDv7 carries (the envelope's `time` equals it: 04-API-SPEC §2).
CREATE FUNCTION analytics_uuid_time(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_timestamp(('x' || lpad(substr(replace(id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint
                        / 1000.0)
$$;

-- One events row (§2.3) for message m.
CREATE FUNCTION analytics_message_event(
    m messages, p_event text, p_at timestamptz, p_latency bigint, p_actor text,
    p_error text, p_details jsonb, p_task uuid DEFAULT NULL
) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'event_id', gen_random_uuid(), 'event_time', analytics_ts(p_at), 'event', p_event,
        'tenant_id', m.tenant_id, 'workspace_id', m.workspace_id, 'message_id', m.id,
        'conversation_id', m.conversation_id, 'task_id', p_task,
        'trace_id', m.trace_id, 'span_id', split_part(m.traceparent, '-', 3),
        'from_agent_id', m.from_agent_id, 'to_agent_id', m.to_agent_id, 'type', m.type,
        'capability', m.capability, 'attempt', LEAST(GREATEST(m.attempts, 0), 255),
        'actor', p_actor, 'payload_bytes', GREATEST(m.payload_bytes, 0),
        'latency_ms', p_latency, 'error_code', p_error, 'policy_id', NULL,
        'bridged_from', m.bridged_from, 'details', p_details)
$$;

-- message.accepted: latency is the time from the sender's creation (the id's time) to acceptance.
CREATE FUNCTION analytics_messages_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    INSERT INTO analytics_outbox (tenant_id, target, row)
    SELECT n.tenant_id, 'events', analytics_message_event(
               n, 'message.accepted', n.accepted_at,
               analytics_ms(analytics_uuid_time(n.id), n.accepted_at), 'gateway', NULL, '{}')
      FROM new_rows n;
    RETURN NULL;
END
$$;

-- The steps an update proves: published (a stream sequence appeared), fetched (again),
-- delivered, read, and the moves to expired, dead_lettered, discarded, bridged and back by redrive.
CREATE FUNCTION analytics_messages_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    INSERT INTO analytics_outbox (tenant_id, target, row)
    SELECT n.tenant_id, 'events', analytics_message_event(n, e.event, e.at, e.latency, e.actor,
                                                          e.error, e.details)
      FROM new_rows n
      JOIN old_rows o ON o.tenant_id = n.tenant_id AND o.id = n.id AND o.accepted_at = n.accepted_at
     CROSS JOIN LATERAL (VALUES
        (o.stream_seq IS NULL AND n.stream_seq IS NOT NULL, 'message.published', clock_timestamp(),
         analytics_ms(n.accepted_at, clock_timestamp()), 'gateway', NULL::text,
         jsonb_build_object('stream_seq', n.stream_seq)),
        (n.status = 'fetched' AND (o.status <> 'fetched' OR n.attempts > o.attempts),
         'message.fetched', clock_timestamp(), analytics_ms(n.accepted_at, clock_timestamp()),
         'gateway', NULL, '{}'::jsonb),
        (o.delivered_at IS NULL AND n.delivered_at IS NOT NULL, 'message.delivered',
         n.delivered_at, analytics_ms(n.accepted_at, n.delivered_at), 'sidecar', NULL, '{}'),
        (o.read_at IS NULL AND n.read_at IS NOT NULL, 'message.read', n.read_at,
         analytics_ms(COALESCE(n.delivered_at, n.accepted_at), n.read_at), 'sidecar', NULL, '{}'),
        (n.status <> o.status AND n.status IN ('expired', 'dead_lettered', 'discarded', 'bridged'),
         'message.' || n.status::text, clock_timestamp(),
         analytics_ms(n.accepted_at, clock_timestamp()), 'gateway',
         CASE WHEN n.status = 'dead_lettered' THEN
             (SELECT d.dlq_reason FROM delivery_state d
               WHERE d.msg_id = n.id AND d.agent_id = n.to_agent_id) END,
         '{}'),
        (o.status = 'dead_lettered' AND n.status = 'accepted', 'message.redriven',
         clock_timestamp(), NULL::bigint, 'api', NULL, '{}')
     ) AS e(happened, event, at, latency, actor, error, details)
     WHERE e.happened;
    RETURN NULL;
END
$$;

CREATE TRIGGER analytics_messages_inserted AFTER INSERT ON messages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION analytics_messages_inserted();
CREATE TRIGGER analytics_messages_updated AFTER UPDATE ON messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION analytics_messages_updated();

-- task.state_changed (and task.budget_exceeded before it, decisions/0031) on the task's
-- request message; latency is the time since the task's previous transition.
CREATE FUNCTION analytics_task_transitions() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    INSERT INTO analytics_outbox (tenant_id, target, row)
    SELECT n.tenant_id, 'events', analytics_message_event(
               m, e.event, n.at,
               analytics_ms((SELECT max(p.at) FROM task_transitions p
                              WHERE p.task_id = n.task_id AND p.at < n.at AND p.id <> n.id), n.at),
               'gateway', CASE WHEN e.event = 'task.budget_exceeded' THEN 'AB-6012' ELSE t.error_code END,
               jsonb_build_object('from', n.from_state, 'to', n.to_state, 'reason', n.reason),
               t.id)
      FROM new_rows n
      JOIN tasks t ON t.id = n.task_id
      JOIN messages m ON m.tenant_id = t.tenant_id AND m.id = t.request_msg_id
     CROSS JOIN LATERAL (VALUES ('task.budget_exceeded', COALESCE(n.reason, '') LIKE 'budget_exceeded%'),
                                ('task.state_changed', true)) AS e(event, happened)
     WHERE e.happened;
    RETURN NULL;
END
$$;

CREATE TRIGGER analytics_task_transitions AFTER INSERT ON task_transitions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION analytics_task_transitions();

-- usage (§2.4) as stored; cost_usd was computed by the gateway at insert (decisions/0031).
CREATE FUNCTION analytics_usage_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    INSERT INTO analytics_outbox (tenant_id, target, row)
    SELECT n.tenant_id, 'usage',
           to_jsonb(n) || jsonb_build_object('recorded_at', analytics_ts(n.recorded_at))
      FROM new_rows n;
    RETURN NULL;
END
$$;

CREATE TRIGGER analytics_usage_inserted AFTER INSERT ON usage
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION analytics_usage_inserted();
