-- A2A bridges (docs/decisions/0032): per workspace, the agent through which A2A clients reach
-- the workspace's agents. A2A callers hold integration tokens, not agent keys, so the gateway
-- signs their messages as this agent with a key it keeps here, its private half wrapped by the
-- deployment keyring as signing_keys' are (kid = the agent_keys id). The model is silent on
-- A2A calls beyond the agent card; this table is an addition. Like tenant_keys, it is not
-- granted to the support role: wrapped keys are of no use to a support reader.
CREATE TABLE a2a_bridges (
    tenant_id        uuid NOT NULL REFERENCES tenants(id),
    workspace_id     uuid NOT NULL REFERENCES workspaces(id),
    agent_id         uuid NOT NULL REFERENCES agents(id),
    key_id           uuid NOT NULL REFERENCES agent_keys(id),
    private_key_enc  bytea NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workspace_id)
);

ALTER TABLE a2a_bridges ENABLE ROW LEVEL SECURITY;
ALTER TABLE a2a_bridges FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON a2a_bridges
    USING (tenant_id = current_tenant_id()) WITH CHECK (tenant_id = current_tenant_id());
CREATE POLICY support_read ON a2a_bridges FOR SELECT TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = a2a_bridges.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
CREATE POLICY support_consent_required ON a2a_bridges AS RESTRICTIVE TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = a2a_bridges.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
