-- Platform signing keys (data model §1.4): the owner path that creates and retires them.
--
-- agentbus_app may only read signing_keys through the two views of 0002, so keys are made on
-- the owner's side: `serve` (which holds the administrative URL) calls create_signing_key at
-- startup when no usable key exists, and operators rotate with it. The private half arrives
-- already wrapped by the deployment keyring; the database never sees it in the clear.
-- Execution is not granted to agentbus_app.

-- Insert a key. With p_only_if_none, do nothing (and return false) when a usable key exists;
-- the advisory lock makes two replicas starting at once create one key, not two.
CREATE FUNCTION create_signing_key(p_kid text, p_public_key bytea, p_private_key_enc bytea,
                                   p_only_if_none boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    IF p_kid !~ '^sk_[0-9a-f]{32}$' THEN
        RAISE EXCEPTION 'signing key id must be sk_ and 32 hex digits, not %', p_kid;
    END IF;
    IF length(p_public_key) <> 32 THEN
        RAISE EXCEPTION 'an Ed25519 public key is 32 bytes';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('agentbus.create_signing_key'));
    IF p_only_if_none AND EXISTS (SELECT 1 FROM signing_keys WHERE active AND retired_at IS NULL)
    THEN
        RETURN false;
    END IF;
    INSERT INTO signing_keys (kid, alg, public_key, private_key_enc)
    VALUES (p_kid, 'EdDSA', p_public_key, p_private_key_enc);
    RETURN true;
END
$$;

-- Retire a key: it stops signing and its credentials stop being accepted; it stays in the JWKS
-- (receipts signed with it must remain verifiable).
CREATE FUNCTION retire_signing_key(p_kid text)
RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
    WITH retired AS (
        UPDATE signing_keys SET active = false, retired_at = now()
         WHERE kid = p_kid AND retired_at IS NULL
        RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM retired)
$$;

REVOKE ALL ON FUNCTION create_signing_key(text, bytea, bytea, boolean),
                       retire_signing_key(text) FROM PUBLIC;
