-- Batch updates of messages write their rows by TID only, whatever the planner believes.
--
-- They found each row by its key and joined those (tableoid, ctid) pairs to messages, leaving
-- the planner free to read the target another way. It could not tell how many of a partition's
-- rows are the tenant's (the row security condition compares tenant_id with a setting, so
-- without statistics it guesses 0.5% of the rows, and with them 1 / the number of tenants), so
-- an index scan of all of the tenant's rows looked as cheap as fetching the rows by TID: on a
-- bench database of a few thousand messages each such statement read them all, 10 ms a call,
-- and ever more as the tenant grew.
--
-- message_tids() finds the rows by key, one index probe per id, and keeps those whose status
-- allows the change; it runs with index scans on whatever its caller set. The updates run with
-- index and bitmap scans off for their own statement and read their target only through
-- ctid = ANY(those TIDs): a TID scan, or a sequential scan of a partition too small to matter.
-- The rows were locked by an earlier statement, so the TIDs are those of their latest versions;
-- record_receipts locks and reads its rows in one statement, which returns the latest versions.
CREATE FUNCTION message_tids(
    p_tenant_id uuid, p_ids uuid[], p_accepted_at timestamptz[], p_from message_status_t[])
RETURNS tid[]
LANGUAGE sql STABLE SECURITY INVOKER
SET enable_indexscan = on SET enable_bitmapscan = on
AS $$
    SELECT COALESCE(array_agg(x.tid), '{}')
      FROM unnest(p_ids, p_accepted_at) AS u(id, at)
      CROSS JOIN LATERAL (
          SELECT m0.ctid AS tid, m0.status FROM public.messages m0
           WHERE m0.tenant_id = p_tenant_id AND m0.id = u.id AND m0.accepted_at = u.at
          OFFSET 0) AS x
     WHERE x.status = ANY (p_from)
$$;

CREATE OR REPLACE FUNCTION record_receipts(
    p_tenant_id uuid, p_issued_to_token uuid, p_ids uuid[], p_msg_ids uuid[],
    p_stream_seqs bigint[], p_issued_at timestamptz[], p_signatures bytea[],
    p_message_accepted_at timestamptz[])
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
DECLARE
    v_tids tid[];
    v_ids uuid[];
    v_ats timestamptz[];
    v_seqs bigint[];
    v_indexscan text;
    v_bitmapscan text;
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant_id::text, true);
    -- One probe per row both locks it and reads it: a row locked after a wait comes back as
    -- its latest version, TID and stream_seq included.
    SELECT array_agg(x.tid), array_agg(r.id), array_agg(r.at), array_agg(r.seq)
      INTO v_tids, v_ids, v_ats, v_seqs
      FROM unnest(p_msg_ids, p_stream_seqs, p_message_accepted_at) AS r(id, seq, at)
      CROSS JOIN LATERAL (
          SELECT m0.ctid AS tid, m0.stream_seq FROM public.messages m0
           WHERE m0.tenant_id = p_tenant_id AND m0.id = r.id AND m0.accepted_at = r.at
          OFFSET 0 FOR UPDATE) AS x
     WHERE r.seq IS NOT NULL AND r.at IS NOT NULL AND x.stream_seq IS NULL;
    IF v_tids IS NOT NULL THEN
        v_indexscan := current_setting('enable_indexscan');
        v_bitmapscan := current_setting('enable_bitmapscan');
        PERFORM set_config('enable_indexscan', 'off', true),
                set_config('enable_bitmapscan', 'off', true);
        UPDATE public.messages m SET stream_seq = k.seq
          FROM unnest(v_ids, v_ats, v_seqs) AS k(id, at, seq)
         WHERE m.ctid = ANY (v_tids) AND m.tenant_id = p_tenant_id AND m.id = k.id
           AND m.accepted_at = k.at;
        PERFORM set_config('enable_indexscan', v_indexscan, true),
                set_config('enable_bitmapscan', v_bitmapscan, true);
    END IF;
    INSERT INTO public.receipts (id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at,
                                 signature)
    SELECT r.id, p_tenant_id, r.msg_id, r.seq, p_issued_to_token, r.issued_at, r.signature
      FROM unnest(p_ids, p_msg_ids, p_stream_seqs, p_issued_at, p_signatures)
           AS r(id, msg_id, seq, issued_at, signature);
END
$$;
