-- The functions that build an analytics event (migration 0021), declared as what they call makes
-- them: analytics_message_event calls gen_random_uuid() and is volatile, analytics_ts calls
-- to_char() and is stable. Declared stable and immutable, neither could be inlined into the
-- triggers' statements, so each event paid for two SQL function calls of its own; inlined, the
-- update trigger takes about a sixth less time (docs/agentbus/analytics.md).

ALTER FUNCTION analytics_ts(timestamptz) STABLE;
ALTER FUNCTION analytics_message_event(messages, text, timestamptz, bigint, text, text, jsonb, uuid)
    VOLATILE;
