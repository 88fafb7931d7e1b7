-- The absurd queue that runs operations (tenant deletion now; validation and catalog imports
-- later), and the privileges that keep the audit chains append-only for the application.
SELECT absurd.create_queue('strataplane');

-- The application appends audit events and never rewrites them; tenant events are deleted
-- only with their tenant (by the deletion job), platform events never.
REVOKE UPDATE ON strataplane.audit_event FROM strataplane_app;
REVOKE UPDATE, DELETE ON strataplane.platform_audit_event FROM strataplane_app;
