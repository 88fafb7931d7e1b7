-- Accepting an invitation (04-API-SPEC §10.3): the one-time link's token is the only credential,
-- so the invitation is found by its SHA-256 before the tenant is known, through a narrow lookup
-- function like lookup_integration_token's. Addition: a unique index on token_hash (the model
-- is silent), which serves that lookup and keeps two invitations from sharing a hash.
CREATE UNIQUE INDEX invitations_token_hash ON invitations (token_hash);

CREATE POLICY platform_lookup ON invitations FOR SELECT TO agentbus_owner
    USING (current_setting('agentbus.lookup', true) = 'on');

CREATE FUNCTION lookup_invitation(p_token_hash bytea)
RETURNS TABLE (id uuid, tenant_id uuid)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    PERFORM set_config('agentbus.lookup', 'on', true);
    RETURN QUERY SELECT i.id, i.tenant_id FROM invitations i WHERE i.token_hash = p_token_hash;
    PERFORM set_config('agentbus.lookup', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION lookup_invitation(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lookup_invitation(bytea) TO agentbus_app;
