-- Invitations to a tenant (docs/decisions/0022): a tenant admin invites an existing user, who
-- becomes a member only by accepting. An addition to spec/strataplane-schema.md, which has no
-- such table. Pending invitations only: accepting, declining or revoking deletes the row.
SET LOCAL search_path TO strataplane;

CREATE TABLE tenant_invitation (
    id         uuid        NOT NULL,
    tenant_id  uuid        NOT NULL,
    user_id    uuid        NOT NULL,
    created_by uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (id),
    UNIQUE (tenant_id, user_id),
    FOREIGN KEY (tenant_id) REFERENCES tenant (id),
    FOREIGN KEY (user_id) REFERENCES app_user (id) ON DELETE CASCADE,
    FOREIGN KEY (created_by) REFERENCES app_user (id) ON DELETE SET NULL
);

CREATE INDEX tenant_invitation_user_idx ON tenant_invitation (user_id);

SELECT enable_tenant_isolation('tenant_invitation'::regclass);
