-- record_receipts (0008) reaches each message of the batch by its full key. Its UPDATE joined
-- the id array to messages and left the plan to the statistics: PostgreSQL chose the partial
-- index of unpublished rows, and scanned every entry the index had collected since the last
-- vacuum, though the rows had long been published. Now a first statement locks each row, found
-- by one index probe (the lateral subquery, kept apart by OFFSET 0, runs per id); the UPDATE,
-- a statement of its own so that it sees the latest version of every locked row, finds each
-- again the same way, keeps it if its stream_seq is still NULL (checked outside the subquery,
-- so the partial index cannot serve it) and writes it through (tableoid, ctid). The arrays
-- still run in parallel; a NULL sequence or accepted_at leaves that message row alone.
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
    UPDATE public.messages m SET stream_seq = k.seq
      FROM (SELECT x.toid, x.tid, r.seq
              FROM unnest(p_msg_ids, p_stream_seqs, p_message_accepted_at) AS r(id, seq, at)
              CROSS JOIN LATERAL (
                  SELECT m0.tableoid AS toid, m0.ctid AS tid, m0.stream_seq
                    FROM public.messages m0
                   WHERE m0.tenant_id = p_tenant_id AND m0.id = r.id AND m0.accepted_at = r.at
                  OFFSET 0) AS x
             WHERE r.seq IS NOT NULL AND r.at IS NOT NULL AND x.stream_seq IS NULL) AS k
     WHERE m.tableoid = k.toid AND m.ctid = k.tid;
    INSERT INTO public.receipts (id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at,
                                 signature)
    SELECT r.id, p_tenant_id, r.msg_id, r.seq, p_issued_to_token, r.issued_at, r.signature
      FROM unnest(p_ids, p_msg_ids, p_stream_seqs, p_issued_at, p_signatures)
           AS r(id, msg_id, seq, issued_at, signature);
END
$$;
