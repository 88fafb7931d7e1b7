-- record_receipts with the issuing token per receipt: the receipts of sends by several agents
-- (each with its own token) that finish at the same moment are recorded by one call, in one
-- transaction (gateway/actions/receipts.py). The body is that of 0010 otherwise; the generic
-- plans of 0011 are set with the function.
DROP FUNCTION record_receipts(uuid, uuid, uuid[], uuid[], bigint[], timestamptz[], bytea[],
                              timestamptz[]);

CREATE FUNCTION record_receipts(
    p_tenant_id uuid, p_issued_to_tokens uuid[], p_ids uuid[], p_msg_ids uuid[],
    p_stream_seqs bigint[], p_issued_at timestamptz[], p_signatures bytea[],
    p_message_accepted_at timestamptz[])
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET plan_cache_mode = force_generic_plan
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
    -- Each row is locked and read by one probe, as in 0010.
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
    SELECT r.id, p_tenant_id, r.msg_id, r.seq, r.token, r.issued_at, r.signature
      FROM unnest(p_ids, p_msg_ids, p_stream_seqs, p_issued_at, p_signatures,
                  p_issued_to_tokens) AS r(id, msg_id, seq, issued_at, signature, token);
END
$$;
REVOKE ALL ON FUNCTION record_receipts(uuid, uuid[], uuid[], uuid[], bigint[], timestamptz[],
                                       bytea[], timestamptz[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_receipts(uuid, uuid[], uuid[], uuid[], bigint[], timestamptz[],
                                          bytea[], timestamptz[]) TO agentbus_app;
