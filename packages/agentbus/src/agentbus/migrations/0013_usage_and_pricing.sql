-- Usage and model pricing (data model §2.4). The model keeps both in ClickHouse; this deployment
-- runs no ClickHouse yet, so the gateway keeps them in PostgreSQL with the model's columns and
-- the nearest types (docs/decisions/0031): UInt64 -> bigint (the API refuses more than
-- 2**63-1), Decimal -> numeric, LowCardinality(String) -> text with the model's vocabulary as a
-- CHECK, DateTime64 -> timestamptz, details (JSON in a String) -> jsonb. retention_days is a
-- ClickHouse MATERIALIZED column read from the tenant at insert: here the retention job reads the
-- tenant instead, so it is not a column.

CREATE TABLE usage (
    usage_id            uuid NOT NULL,                 -- usg_, the sidecar's usage_local.id
    recorded_at         timestamptz NOT NULL,
    tenant_id           uuid NOT NULL,
    workspace_id        uuid NOT NULL,
    agent_id            uuid NOT NULL,
    task_id             uuid,
    message_id          uuid,
    conversation_id     uuid,
    harness             text NOT NULL,
    provider            text NOT NULL CHECK (provider IN ('anthropic', 'openai', 'google', 'other')),
    model               text NOT NULL,
    input_tokens        bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens       bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens   bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens  bigint NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    reasoning_tokens    bigint NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0),
    cost_usd            numeric(14, 6) NOT NULL,       -- computed from model_pricing unless provider-reported
    cost_source         text NOT NULL CHECK (cost_source IN ('computed', 'harness_reported', 'estimate')),
    reported_by         text NOT NULL CHECK (reported_by IN ('harness', 'proxy', 'agent', 'estimate')),
    confidence          text NOT NULL CHECK (confidence IN ('exact', 'approximate', 'unverified')),
    bus_bytes_in        bigint NOT NULL DEFAULT 0 CHECK (bus_bytes_in >= 0),
    bus_bytes_out       bigint NOT NULL DEFAULT 0 CHECK (bus_bytes_out >= 0),
    bus_messages        integer NOT NULL DEFAULT 0 CHECK (bus_messages >= 0),
    duration_ms         bigint CHECK (duration_ms >= 0),
    details             jsonb NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, usage_id)                  -- re-uploads of a record are duplicates
);
CREATE INDEX usage_recorded ON usage (tenant_id, recorded_at, agent_id);   -- the model's ORDER BY
CREATE INDEX usage_task ON usage (tenant_id, task_id) WHERE task_id IS NOT NULL;  -- task spend

ALTER TABLE usage ENABLE ROW LEVEL SECURITY;
ALTER TABLE usage FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON usage
    USING (tenant_id = current_tenant_id()) WITH CHECK (tenant_id = current_tenant_id());
CREATE POLICY support_read ON usage FOR SELECT TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = usage.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
CREATE POLICY support_consent_required ON usage AS RESTRICTIVE TO agentbus_support USING (
    EXISTS (SELECT 1 FROM support_consents c WHERE c.tenant_id = usage.tenant_id
            AND now() BETWEEN c.starts_at AND c.ends_at AND c.revoked_at IS NULL));
-- Billing data: the gateway adds usage rows, never rewrites them.
REVOKE UPDATE ON usage FROM agentbus_app;
GRANT SELECT ON usage TO agentbus_support;

-- Model pricing, maintained by the platform (no tenant, no RLS); the gateway only reads it.
CREATE TABLE model_pricing (
    provider             text NOT NULL,
    model                text NOT NULL,
    effective_from       date NOT NULL,
    input_per_mtok       numeric(10, 4) NOT NULL,
    output_per_mtok      numeric(10, 4) NOT NULL,
    cache_read_per_mtok  numeric(10, 4) NOT NULL,
    cache_write_per_mtok numeric(10, 4) NOT NULL,
    PRIMARY KEY (provider, model, effective_from)
);
REVOKE ALL ON model_pricing FROM agentbus_app;
GRANT SELECT ON model_pricing TO agentbus_app;

-- Seed: list prices in USD per million tokens for standard (not batch) requests, as each vendor's
-- public pricing page showed them in late 2025; effective_from is the day the model (or the
-- price) was published. Prompts past a long-context threshold cost more at some vendors; those
-- tiers are not modelled here (a row per model, the base tier).
--
-- Anthropic: https://www.anthropic.com/pricing#api and
-- https://docs.anthropic.com/en/docs/about-claude/pricing (cache write = 5-minute cache write).
-- OpenAI: https://openai.com/api/pricing/ and https://platform.openai.com/docs/pricing (no charge
-- for writing a prompt cache: the write column repeats the input price, cache reads are
-- "cached input").
-- Google: https://ai.google.dev/gemini-api/docs/pricing (prompts up to 200k tokens; cache read =
-- "context caching" price; cache storage per hour is not a token price, so the write column
-- repeats the input price).
INSERT INTO model_pricing (provider, model, effective_from, input_per_mtok, output_per_mtok,
                           cache_read_per_mtok, cache_write_per_mtok) VALUES
    ('anthropic', 'claude-opus-4-5',   '2025-11-24',  5.00, 25.00, 0.50,  6.25),
    ('anthropic', 'claude-opus-4-1',   '2025-08-05', 15.00, 75.00, 1.50, 18.75),
    ('anthropic', 'claude-opus-4',     '2025-05-22', 15.00, 75.00, 1.50, 18.75),
    ('anthropic', 'claude-sonnet-4-5', '2025-09-29',  3.00, 15.00, 0.30,  3.75),
    ('anthropic', 'claude-sonnet-4',   '2025-05-22',  3.00, 15.00, 0.30,  3.75),
    ('anthropic', 'claude-3-7-sonnet', '2025-02-24',  3.00, 15.00, 0.30,  3.75),
    ('anthropic', 'claude-haiku-4-5',  '2025-10-15',  1.00,  5.00, 0.10,  1.25),
    ('anthropic', 'claude-3-5-haiku',  '2024-10-22',  0.80,  4.00, 0.08,  1.00),
    ('openai',    'gpt-5',             '2025-08-07',  1.25, 10.00, 0.125, 1.25),
    ('openai',    'gpt-5-codex',       '2025-09-15',  1.25, 10.00, 0.125, 1.25),
    ('openai',    'gpt-5-mini',        '2025-08-07',  0.25,  2.00, 0.025, 0.25),
    ('openai',    'gpt-5-nano',        '2025-08-07',  0.05,  0.40, 0.005, 0.05),
    ('openai',    'gpt-4.1',           '2025-04-14',  2.00,  8.00, 0.50,  2.00),
    ('openai',    'gpt-4.1-mini',      '2025-04-14',  0.40,  1.60, 0.10,  0.40),
    ('openai',    'o3',                '2025-06-10',  2.00,  8.00, 0.50,  2.00),
    ('openai',    'o4-mini',           '2025-04-16',  1.10,  4.40, 0.275, 1.10),
    ('openai',    'gpt-4o',            '2024-10-01',  2.50, 10.00, 1.25,  2.50),
    ('google',    'gemini-2.5-pro',    '2025-06-17',  1.25, 10.00, 0.31,  1.25),
    ('google',    'gemini-2.5-flash',  '2025-06-17',  0.30,  2.50, 0.075, 0.30),
    ('google',    'gemini-2.5-flash-lite', '2025-07-22', 0.10, 0.40, 0.025, 0.10),
    ('google',    'gemini-2.0-flash',  '2025-02-05',  0.10,  0.40, 0.025, 0.10);
