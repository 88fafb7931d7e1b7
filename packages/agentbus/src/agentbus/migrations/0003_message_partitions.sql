-- Monthly partitions of messages (data model §1.6, job partitions.create in §1.11).
--
-- messages_YYYY_MM holds accepted_at in [first of the month, first of the next month), both
-- bounds at 00:00 UTC whatever the session time zone. The function creates the partition of
-- the month of from_time and of months_ahead months after it, skipping those that exist, and
-- returns the names it created. It runs as the owner (SECURITY DEFINER) so the gateway's daily
-- leader loop, logged in as agentbus_app, can call it without any DDL privilege of its own.
--
-- A partition is a table of its own: reading it directly would skip the parent's policies. So
-- each partition is closed to every role but the owner (REVOKE) and FORCEs RLS with no policy;
-- rows are reached only through messages, where tenant_isolation applies.
CREATE FUNCTION ensure_message_partitions(months_ahead int DEFAULT 3,
                                          from_time timestamptz DEFAULT now())
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    first_month date := date_trunc('month', from_time AT TIME ZONE 'UTC')::date;
    m_start date;
    part text;
BEGIN
    IF months_ahead IS NULL OR months_ahead NOT BETWEEN 0 AND 36 THEN
        RAISE EXCEPTION 'months_ahead must be between 0 and 36, not %', months_ahead;
    END IF;
    -- Two callers at once (two replicas, or the CLI beside the loop) take turns.
    PERFORM pg_advisory_xact_lock(hashtext('agentbus.ensure_message_partitions'));
    FOR i IN 0..months_ahead LOOP
        m_start := (first_month + make_interval(months => i))::date;
        part := 'messages_' || to_char(m_start, 'YYYY_MM');
        CONTINUE WHEN to_regclass(format('public.%I', part)) IS NOT NULL;
        EXECUTE format(
            'CREATE TABLE public.%I PARTITION OF public.messages FOR VALUES FROM (%L) TO (%L)',
            part, m_start::timestamp AT TIME ZONE 'UTC',
            (m_start + interval '1 month')::timestamp AT TIME ZONE 'UTC');
        EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC, agentbus_app, agentbus_support', part);
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', part);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', part);
        RETURN NEXT part;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION ensure_message_partitions(int, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ensure_message_partitions(int, timestamptz) TO agentbus_app;

-- The current month and the three after it.
SELECT ensure_message_partitions(3);
