-- The console's sign-in (addition: the data model names the console but no table for its
-- sessions). A tenant's owners and admins sign in with a one-time link (minted by the platform
-- operator's CLI, or by the tenant's IdP integration when there is one) and keep a session
-- cookie. Both tables keep SHA-256 digests of the secrets only (decisions/0051).

CREATE TABLE console_sign_in_links (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    user_id         uuid NOT NULL REFERENCES users(id),
    token_hash      bytea NOT NULL,                 -- SHA-256 of the link's secret
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz
);

CREATE TABLE console_sessions (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants(id),
    user_id         uuid NOT NULL REFERENCES users(id),
    secret_hash     bytea NOT NULL,                 -- SHA-256 of the cookie's secret
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz
);
CREATE INDEX console_sessions_user ON console_sessions (tenant_id, user_id) WHERE revoked_at IS NULL;

DO $rls$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['console_sign_in_links', 'console_sessions'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_tenant_id())'
                       ' WITH CHECK (tenant_id = current_tenant_id())', t);
        EXECUTE format('CREATE POLICY support_read ON %1$I FOR SELECT TO agentbus_support USING ('
                       'EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = %1$I.tenant_id'
                       ' AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL))', t);
        EXECUTE format('CREATE POLICY support_consent_required ON %1$I AS RESTRICTIVE'
                       ' TO agentbus_support USING (EXISTS (SELECT 1 FROM support_consents c'
                       ' WHERE c.tenant_id = %1$I.tenant_id AND now() BETWEEN c.starts_at'
                       ' AND c.ends_at AND c.revoked_at IS NULL))', t);
    END LOOP;
END
$rls$;

GRANT SELECT ON console_sign_in_links, console_sessions TO agentbus_support;
