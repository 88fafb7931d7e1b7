-- The agent URL (server.agent_url, STRATAPLANE_FLEET_AGENT_URL) each tenant's desired
-- artifacts were last rendered with (docs/decisions/0033). The URL is a render input outside
-- the revision: a server started with another one re-renders every agent at its desired
-- revision, without a merge. An addition to spec/strataplane-schema.md.
SET LOCAL search_path TO strataplane;

CREATE TABLE fleet_render_url (
    tenant_id   uuid        NOT NULL,
    agent_url   text        NOT NULL,
    rendered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

SELECT enable_tenant_isolation('fleet_render_url'::regclass);
