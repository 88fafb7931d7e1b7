-- record_receipt for many receipts at once: a batch of sends records every receipt, and the
-- PubAck's sequence of every message, in one statement. The arrays run in parallel; a NULL
-- sequence or accepted_at leaves that message row alone, as before. A single receipt is an
-- array of one, so the one-receipt function goes.
DROP FUNCTION record_receipt(uuid, uuid, uuid, bigint, uuid, timestamptz, bytea, timestamptz);

CREATE FUNCTION record_receipts(
    p_tenant_id uuid, p_issued_to_token uuid, p_ids uuid[], p_msg_ids uuid[],
    p_stream_seqs bigint[], p_issued_at timestamptz[], p_signatures bytea[],
    p_message_accepted_at timestamptz[])
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant_id::text, true);
    UPDATE public.messages m SET stream_seq = r.seq
      FROM unnest(p_msg_ids, p_stream_seqs, p_message_accepted_at) AS r(msg_id, seq, accepted_at)
     WHERE r.seq IS NOT NULL AND r.accepted_at IS NOT NULL
       AND m.tenant_id = p_tenant_id AND m.id = r.msg_id AND m.accepted_at = r.accepted_at
       AND m.stream_seq IS NULL;
    INSERT INTO public.receipts (id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at,
                                 signature)
    SELECT r.id, p_tenant_id, r.msg_id, r.seq, p_issued_to_token, r.issued_at, r.signature
      FROM unnest(p_ids, p_msg_ids, p_stream_seqs, p_issued_at, p_signatures)
           AS r(id, msg_id, seq, issued_at, signature);
END
$$;
REVOKE ALL ON FUNCTION record_receipts(uuid, uuid, uuid[], uuid[], bigint[], timestamptz[],
                                       bytea[], timestamptz[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_receipts(uuid, uuid, uuid[], uuid[], bigint[], timestamptz[],
                                          bytea[], timestamptz[]) TO agentbus_app;
