-- The default policy of every tenant (docs/agentbus/policies.md, docs/decisions/0047): one
-- tenant-wide Cedar policy named 'default' that permits everything, which is how AgentBus
-- behaved before policies. Tenants created from now on get it with their owner; this gives it
-- to the tenants that exist and have an owner, authored by their earliest owner. Row security
-- holds the owner role to one tenant at a time.
DO $defaults$
DECLARE
    t uuid;
    author uuid;
BEGIN
    FOR t IN SELECT id FROM platform_tenants() LOOP
        PERFORM set_config('app.tenant_id', t::text, true);
        SELECT user_id INTO author FROM tenant_memberships
         WHERE tenant_id = t AND role = 'owner' ORDER BY created_at, user_id LIMIT 1;
        CONTINUE WHEN author IS NULL;
        CONTINUE WHEN EXISTS (SELECT 1 FROM policies WHERE tenant_id = t);
        INSERT INTO policies (id, tenant_id, workspace_id, name, version, cedar, enabled,
                              created_by)
        VALUES (uuidv7(), t, NULL, 'default', 1,
                E'// Every agent may address every other agent of the tenant, as without policies.\n'
                || E'// Disable it and write narrower permits, or add forbids beside it.\n'
                || E'permit(principal, action, resource);\n',
                true, author);
    END LOOP;
    PERFORM set_config('app.tenant_id', '', true);
END
$defaults$;
