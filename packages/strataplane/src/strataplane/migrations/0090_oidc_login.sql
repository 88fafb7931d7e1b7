-- OIDC logins between the redirect to the provider and its callback (docs/decisions/0046).
-- state_hash is the SHA-256 of the state the browser carries (in the URL and a cookie), never
-- the state itself; the nonce and PKCE verifier stay here, so neither ever reaches the browser.
-- An addition to spec/strataplane-schema.md. Installation-wide, like web_session: no tenant
-- data, no row security. A row is taken (deleted) by its callback, or purged once expired.
SET LOCAL search_path TO strataplane;

CREATE TABLE oidc_login (
    state_hash    text        NOT NULL,
    nonce         text        NOT NULL,
    code_verifier text        NOT NULL,
    next_path     text        NOT NULL,
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (state_hash)
);

CREATE INDEX oidc_login_expires ON oidc_login USING btree (expires_at);
