-- record_receipts (0009) writes each message row through (tableoid, ctid), but its UPDATE only
-- joined those to messages: the planner was free to read the rows to write by scanning the
-- target, and with a guessed tenant share (no statistics yet) and an array of unknown length
-- (a plan cached after a few runs) it joined by hash to a bitmap scan of every row of the
-- tenant in each partition, 10 ms per call on a bench database of a few thousand messages. The
-- rows to write are now a materialized set, and the target is read by TID only
-- (ctid = ANY of that set's TIDs, a TID scan per partition), whatever the estimates.
CREATE OR REPLACE FUNCTION record_receipts(
    p_tenant_id uuid, p_issued_to_token uuid, p_ids uuid[], p_msg_ids uuid[],
    p_stream_seqs bigint[], p_issued_at timestamptz[], p_signatures bytea[],
    p_message_accepted_at timestamptz[])
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant_id::text, true);
    PERFORM 1
       FROM unnest(p_msg_ids, p_stream_seqs, p_message_accepted_at) AS r(id, seq, at)
       CROSS JOIN LATERAL (
           SELECT 1 FROM public.messages m0
            WHERE m0.tenant_id = p_tenant_id AND m0.id = r.id AND m0.accepted_at = r.at
           OFFSET 0 FOR UPDATE) AS x
      WHERE r.seq IS NOT NULL AND r.at IS NOT NULL;
    WITH k AS MATERIALIZED (
        SELECT x.toid, x.tid, r.seq
          FROM unnest(p_msg_ids, p_stream_seqs, p_message_accepted_at) AS r(id, seq, at)
          CROSS JOIN LATERAL (
              SELECT m0.tableoid AS toid, m0.ctid AS tid, m0.stream_seq
                FROM public.messages m0
               WHERE m0.tenant_id = p_tenant_id AND m0.id = r.id AND m0.accepted_at = r.at
              OFFSET 0) AS x
         WHERE r.seq IS NOT NULL AND r.at IS NOT NULL AND x.stream_seq IS NULL)
    UPDATE public.messages m SET stream_seq = k.seq
      FROM k
     WHERE m.ctid = ANY (ARRAY(SELECT k.tid FROM k)) AND m.tableoid = k.toid AND m.ctid = k.tid;
    INSERT INTO public.receipts (id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at,
                                 signature)
    SELECT r.id, p_tenant_id, r.msg_id, r.seq, p_issued_to_token, r.issued_at, r.signature
      FROM unnest(p_ids, p_msg_ids, p_stream_seqs, p_issued_at, p_signatures)
           AS r(id, msg_id, seq, issued_at, signature);
END
$$;
