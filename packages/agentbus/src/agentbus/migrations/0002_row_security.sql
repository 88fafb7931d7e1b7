-- Row-level security (data model §1.10) and grants.
--
-- Roles: agentbus_owner owns everything and runs migrations; agentbus_app is the gateway;
-- agentbus_support is the support console (read-mostly). All three are NOBYPASSRLS and every
-- tenant table FORCEs row-level security, so the owner is held to the policies as well.

-- Helper used by every policy.
CREATE FUNCTION current_tenant_id() RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT NULLIF(current_setting('app.tenant_id', true), '')::uuid
$$;

-- The pattern of §1.10 on every table with a tenant_id column, and on tenants by its id
-- (addition: the model is silent on tenants; a tenant sees only its own row).
--
-- tenant_isolation, support_read: as the model writes them.
-- support_consent_required (addition): RESTRICTIVE, for agentbus_support only. Without it the
-- support role could set app.tenant_id itself and pass tenant_isolation with no consent; with it
-- every row the support role reads or writes needs an open consent window for its tenant.
DO $rls$
DECLARE
    t text;
    consent text;
    tables text[] := ARRAY[
        'workspaces', 'users', 'tenant_memberships', 'workspace_memberships', 'invitations',
        'integration_tokens', 'agents', 'agent_keys', 'conversations', 'messages', 'tasks',
        'task_transitions', 'delivery_state', 'receipts', 'policies', 'grants', 'blobs',
        'audit_actions', 'subscriptions', 'tenant_keys'];
BEGIN
    FOREACH t IN ARRAY tables || ARRAY['tenants'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        consent := format(
            'EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = %I.%I'
            ' AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL)',
            t, CASE WHEN t = 'tenants' THEN 'id' ELSE 'tenant_id' END);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %1$I USING (%2$I = current_tenant_id())'
            ' WITH CHECK (%2$I = current_tenant_id())',
            t, CASE WHEN t = 'tenants' THEN 'id' ELSE 'tenant_id' END);
        EXECUTE format('CREATE POLICY support_read ON %I FOR SELECT TO agentbus_support USING (%s)',
                       t, consent);
        EXECUTE format('CREATE POLICY support_consent_required ON %I AS RESTRICTIVE'
                       ' TO agentbus_support USING (%s)', t, consent);
    END LOOP;
END
$rls$;

-- support_consents itself: the consent test of the other tables reads this table as the
-- support role, so here it is stated on the row (the model's subquery would recurse).
ALTER TABLE support_consents ENABLE ROW LEVEL SECURITY;
ALTER TABLE support_consents FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON support_consents
    USING (tenant_id = current_tenant_id())
    WITH CHECK (tenant_id = current_tenant_id());
CREATE POLICY support_read ON support_consents FOR SELECT TO agentbus_support
    USING (now() BETWEEN starts_at AND ends_at AND revoked_at IS NULL);
CREATE POLICY support_consent_required ON support_consents AS RESTRICTIVE TO agentbus_support
    USING (now() BETWEEN starts_at AND ends_at AND revoked_at IS NULL);

-- Lookups before the tenant is known (04-API-SPEC §1.2: "a narrow lookup function").
-- The functions below run as the owner, which FORCE subjects to RLS; these policies let the
-- owner read across tenants only while agentbus.lookup is 'on', which each lookup function sets
-- around its one query and clears again. (A function-level SET of a custom parameter would
-- need a superuser.) The policies name the owner only: the app or support role setting
-- agentbus.lookup changes nothing for their own queries.
CREATE POLICY platform_lookup ON integration_tokens FOR SELECT TO agentbus_owner
    USING (current_setting('agentbus.lookup', true) = 'on');
CREATE POLICY platform_lookup ON tenants FOR SELECT TO agentbus_owner
    USING (current_setting('agentbus.lookup', true) = 'on');

-- The integration token with this SHA-256, and its tenant's status; no row if unknown.
CREATE FUNCTION lookup_integration_token(p_token_hash bytea)
RETURNS TABLE (id uuid, tenant_id uuid, workspace_id uuid, owner_user_id uuid, env text,
               scopes text[], expires_at timestamptz, revoked_at timestamptz,
               last_used_at timestamptz, tenant_status tenant_status_t)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    PERFORM set_config('agentbus.lookup', 'on', true);
    RETURN QUERY
        SELECT t.id, t.tenant_id, t.workspace_id, t.owner_user_id, t.env, t.scopes,
               t.expires_at, t.revoked_at, t.last_used_at, n.status
          FROM integration_tokens t JOIN tenants n ON n.id = t.tenant_id
         WHERE t.token_hash = p_token_hash;
    PERFORM set_config('agentbus.lookup', 'off', true);
END
$$;

-- Every tenant, for the platform operator's list (04-API-SPEC §10.1 GET /v1/tenants).
CREATE FUNCTION platform_tenants()
RETURNS SETOF tenants
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
BEGIN
    PERFORM set_config('agentbus.lookup', 'on', true);
    RETURN QUERY SELECT * FROM tenants ORDER BY created_at, id;
    PERFORM set_config('agentbus.lookup', 'off', true);
END
$$;

REVOKE ALL ON FUNCTION lookup_integration_token(bytea), platform_tenants() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lookup_integration_token(bytea), platform_tenants() TO agentbus_app;

-- Platform-level tables: no RLS, and not readable by agentbus_app beyond these views.
REVOKE ALL ON plans, signing_keys FROM agentbus_app;

CREATE VIEW plan_limits AS
    SELECT code, limits FROM plans;

-- JWKS and receipt verification: every key's public half.
CREATE VIEW signing_keys_public AS
    SELECT kid, alg, public_key, active, created_at, retired_at FROM signing_keys;

-- Signing: the wrapped private half of usable keys only.
CREATE VIEW signing_keys_usable AS
    SELECT kid, alg, public_key, private_key_enc, created_at
      FROM signing_keys WHERE active AND retired_at IS NULL;

REVOKE ALL ON plan_limits, signing_keys_public, signing_keys_usable FROM agentbus_app;
GRANT SELECT ON plan_limits, signing_keys_public, signing_keys_usable TO agentbus_app;

-- Append-only: the gateway adds audit actions and task transitions, never rewrites them.
-- audit_actions is never deleted by the gateway either (anonymisation on tenant deletion runs
-- as the owner, data model §5.5).
REVOKE UPDATE, DELETE ON audit_actions FROM agentbus_app;
REVOKE UPDATE ON task_transitions FROM agentbus_app;

-- The migration record is the migrator's, not the gateway's.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON public.schema_migrations FROM agentbus_app;

-- Support console: reads tenant tables (RLS: consent only), writes its own audit actions.
-- tenant_keys is left out: wrapped data keys are of no use to a support reader.
GRANT SELECT ON
    tenants, workspaces, users, tenant_memberships, workspace_memberships, invitations,
    integration_tokens, agents, agent_keys, conversations, messages, tasks, task_transitions,
    delivery_state, receipts, policies, grants, blobs, audit_actions, support_consents,
    subscriptions
TO agentbus_support;
GRANT INSERT ON audit_actions TO agentbus_support;
