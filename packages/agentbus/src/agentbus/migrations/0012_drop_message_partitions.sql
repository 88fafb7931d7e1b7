-- Job partitions.drop (data model §1.11): a monthly partition of messages wholly older than the
-- longest tenant retention (counted from now by the function itself) is detached and dropped.
-- By then retention.messages has deleted its rows tenant by tenant, together with their payload
-- objects; a partition that still holds rows (that job behind, or a retention lengthened since)
-- is left for a later run, so no payload object ever loses the row that names it. Runs as the
-- owner, which alone may drop tables; the partition's forced row security is lifted first so
-- the owner sees every row it counts, and put back when the partition stays.
CREATE FUNCTION drop_message_partitions()
RETURNS TABLE (partition_name text, dropped boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    part text;
    upper_bound timestamptz;
    older_than timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('agentbus.ensure_message_partitions'));
    SELECT now() - make_interval(days => COALESCE(max(retention_days), 0))
      INTO older_than FROM platform_tenants();
    FOR part IN
        SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'public.messages'::regclass AND c.relname ~ '^messages_\d{4}_\d{2}$'
         ORDER BY c.relname
    LOOP
        upper_bound := (to_date(substr(part, 10), 'YYYY_MM') + interval '1 month')::timestamp
                       AT TIME ZONE 'UTC';
        CONTINUE WHEN upper_bound > older_than;
        EXECUTE format('ALTER TABLE public.%I NO FORCE ROW LEVEL SECURITY', part);
        partition_name := part;
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM public.%I)', part) INTO dropped;
        IF dropped THEN
            EXECUTE format('ALTER TABLE public.messages DETACH PARTITION public.%I', part);
            EXECUTE format('DROP TABLE public.%I', part);
        ELSE
            EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', part);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION drop_message_partitions() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION drop_message_partitions() TO agentbus_app;
