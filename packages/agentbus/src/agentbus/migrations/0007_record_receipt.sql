-- One statement for what the send path writes after the publish: the receipt, and the
-- PubAck's sequence into the message row where it is still NULL (05-DELIVERY-SEMANTICS §3
-- steps 6-7).
--
-- It sets the tenant scope itself, so the gateway runs it on its own, as one implicit
-- transaction, instead of BEGIN, the scope, the statement and COMMIT. It runs as the caller
-- (agentbus_app), so row-level security applies to both writes exactly as in a scoped
-- transaction; inside one, it scopes to the tenant it is given, which callers pass as the
-- transaction's own.
CREATE FUNCTION record_receipt(
    p_tenant_id uuid, p_id uuid, p_msg_id uuid, p_stream_seq bigint, p_issued_to_token uuid,
    p_issued_at timestamptz, p_signature bytea, p_message_accepted_at timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
    PERFORM set_config('app.tenant_id', p_tenant_id::text, true);
    IF p_stream_seq IS NOT NULL AND p_message_accepted_at IS NOT NULL THEN
        UPDATE public.messages SET stream_seq = p_stream_seq
         WHERE tenant_id = p_tenant_id AND id = p_msg_id
           AND accepted_at = p_message_accepted_at AND stream_seq IS NULL;
    END IF;
    INSERT INTO public.receipts (id, tenant_id, msg_id, stream_seq, issued_to_token, issued_at,
                                 signature)
    VALUES (p_id, p_tenant_id, p_msg_id, p_stream_seq, p_issued_to_token, p_issued_at,
            p_signature);
END
$$;
REVOKE ALL ON FUNCTION record_receipt(uuid, uuid, uuid, bigint, uuid, timestamptz, bytea,
                                      timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION record_receipt(uuid, uuid, uuid, bigint, uuid, timestamptz, bytea,
                                         timestamptz) TO agentbus_app;
