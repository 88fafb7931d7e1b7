-- A tenant table with forced row-level security, used by the kernel's own tests.
CREATE TABLE notes (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id uuid NOT NULL,
    body      text NOT NULL
);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
ALTER TABLE notes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON notes
    USING (tenant_id = NULLIF(current_setting('kit.tenant', true), '')::uuid
           OR current_setting('kit.scope', true) = 'platform')
    WITH CHECK (tenant_id = NULLIF(current_setting('kit.tenant', true), '')::uuid
                OR current_setting('kit.scope', true) = 'platform');
