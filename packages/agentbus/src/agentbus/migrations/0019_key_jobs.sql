-- The keys.rotate job (data model §1.11) runs inside the gateway as agentbus_app: it adds a
-- signing key before the newest one is 150 days old and retires keys past 180 days once the
-- next one has signed for 30 days. Both functions take only public material and an already
-- wrapped private half; the gateway holds the keyring that wraps them either way.
GRANT EXECUTE ON FUNCTION create_signing_key(text, bytea, bytea, boolean),
                          retire_signing_key(text) TO agentbus_app;
