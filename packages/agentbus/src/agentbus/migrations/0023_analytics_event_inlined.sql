-- The functions that build an analytics event (migration 0021), declared as what they call makes
-- them: analytics_message_event calls gen_random_uuid() and is volatile, analytics_ts calls
-- to_char() and is stable. Declared stable and immutable, neither could be inlined into the
-- triggers' statements, so each event paid for two SQL function calls of its own; inlined, an
-- event costs about a third as much (docs/agentbus/analytics.md). The bodies are unchanged.

CREATE OR REPLACE FUNCTION analytics_ts(t timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') $$;

CREATE OR REPLACE FUNCTION analytics_message_event(
    m messages, p_event text, p_at timestamptz, p_latency bigint, p_actor text,
    p_error text, p_details jsonb, p_task uuid DEFAULT NULL
) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
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
