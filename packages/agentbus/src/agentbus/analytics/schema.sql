-- AgentBus analytics in ClickHouse: the data model's §2.3-2.6 tables and views, one DDL for chDB
-- (embedded, the default) and for a ClickHouse server. Statements are separated by lines holding
-- only ';'. Placeholders, filled by agentbus.analytics.schema:
--   {on_cluster}   '' or 'ON CLUSTER <name>' (a replicated deployment)
--   {replicated}   '' or 'Replicated' (engine prefix), with {zk_events} ... the engine arguments
--   {cold}         '' or the TTL move to the cold volume, {tiered} '' or the storage policy
-- Single-node defaults leave them empty: chDB has no Keeper and no 'tiered' policy
-- (docs/decisions/0050). The dictionary reads tenant_retention_source, which the ingester keeps
-- equal to tenants.retention_days in PostgreSQL (the model's POSTGRESQL source would need the
-- analytics store to hold database credentials). mv_edges_daily keys on the Nullable
-- to_agent_id as the model writes it, which ClickHouse allows only with allow_nullable_key.

CREATE DATABASE IF NOT EXISTS agentbus {on_cluster}
;
CREATE TABLE IF NOT EXISTS agentbus.tenant_retention_source {on_cluster}
(
    tenant_id UUID,
    retention_days UInt16,
    updated_at DateTime64(3, 'UTC')
)
ENGINE = {replicated}ReplacingMergeTree({zk_retention}updated_at)
ORDER BY tenant_id
;
CREATE DICTIONARY IF NOT EXISTS agentbus.tenant_retention {on_cluster}
(
    tenant_id UUID,
    retention_days UInt16
)
PRIMARY KEY tenant_id
SOURCE(CLICKHOUSE(QUERY 'SELECT tenant_id, argMax(retention_days, updated_at) AS retention_days FROM agentbus.tenant_retention_source GROUP BY tenant_id'))
LIFETIME(MIN 300 MAX 600)
LAYOUT(HASHED())
;
CREATE TABLE IF NOT EXISTS agentbus.events {on_cluster}
(
    event_id        UUID,
    event_time      DateTime64(3, 'UTC'),
    event           LowCardinality(String),
    tenant_id       UUID,
    workspace_id    UUID,
    message_id      UUID,
    conversation_id UUID,
    task_id         Nullable(UUID),
    trace_id        String,
    span_id         String,
    from_agent_id   UUID,
    to_agent_id     Nullable(UUID),
    type            LowCardinality(String),
    capability      LowCardinality(Nullable(String)),
    attempt         UInt8,
    actor           LowCardinality(String),
    payload_bytes   UInt32,
    latency_ms      Nullable(UInt32),
    error_code      LowCardinality(Nullable(String)),
    policy_id       Nullable(UUID),
    bridged_from    Nullable(UUID),
    details         String CODEC(ZSTD(3)),
    retention_days  UInt16 MATERIALIZED dictGet('agentbus.tenant_retention', 'retention_days', tenant_id),
    ingested_at     DateTime DEFAULT now()
)
ENGINE = {replicated}ReplacingMergeTree({zk_events}ingested_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (tenant_id, event_time, message_id, event)
TTL {cold}toDateTime(event_time) + toIntervalDay(retention_days) DELETE
SETTINGS {tiered}ttl_only_drop_parts = 0, index_granularity = 8192
;
CREATE TABLE IF NOT EXISTS agentbus.usage {on_cluster}
(
    usage_id        UUID,
    recorded_at     DateTime64(3, 'UTC'),
    tenant_id       UUID,
    workspace_id    UUID,
    agent_id        UUID,
    task_id         Nullable(UUID),
    message_id      Nullable(UUID),
    conversation_id Nullable(UUID),
    harness         LowCardinality(String),
    provider        LowCardinality(String),
    model           LowCardinality(String),
    input_tokens    UInt64,
    output_tokens   UInt64,
    cache_read_tokens  UInt64,
    cache_write_tokens UInt64,
    reasoning_tokens   UInt64,
    cost_usd        Decimal(14, 6),
    cost_source     LowCardinality(String),
    reported_by     LowCardinality(String),
    confidence      LowCardinality(String),
    bus_bytes_in    UInt64,
    bus_bytes_out   UInt64,
    bus_messages    UInt32,
    duration_ms     Nullable(UInt64),
    retention_days  UInt16 MATERIALIZED dictGet('agentbus.tenant_retention', 'retention_days', tenant_id),
    details         String CODEC(ZSTD(3))
)
ENGINE = {replicated}MergeTree({zk_usage})
PARTITION BY toYYYYMM(recorded_at)
ORDER BY (tenant_id, recorded_at, agent_id)
TTL {cold_usage}toDateTime(recorded_at) + toIntervalDay(greatest(retention_days, 400)) DELETE
{settings_tiered}
;
CREATE TABLE IF NOT EXISTS agentbus.model_pricing {on_cluster}
(
    provider        LowCardinality(String),
    model           LowCardinality(String),
    effective_from  Date,
    input_per_mtok  Decimal(10, 4),
    output_per_mtok Decimal(10, 4),
    cache_read_per_mtok  Decimal(10, 4),
    cache_write_per_mtok Decimal(10, 4)
)
ENGINE = {replicated}ReplacingMergeTree({zk_pricing})
ORDER BY (provider, model, effective_from)
;
CREATE TABLE IF NOT EXISTS agentbus.audit_chain {on_cluster}
(
    tenant_id       UUID,
    seq             UInt64,
    at              DateTime64(3, 'UTC'),
    event_id        UUID,
    event_kind      LowCardinality(String),
    actor           String,
    summary         String,
    prev_hash       FixedString(32),
    row_hash        FixedString(32),
    signature       Nullable(String)
)
ENGINE = {replicated}MergeTree({zk_audit})
PARTITION BY toYYYYMM(at)
ORDER BY (tenant_id, seq)
{settings_tiered}
;
CREATE MATERIALIZED VIEW IF NOT EXISTS agentbus.mv_cost_daily {on_cluster}
ENGINE = {replicated}SummingMergeTree({zk_cost})
PARTITION BY toYYYYMM(day)
ORDER BY (tenant_id, workspace_id, agent_id, day, model, reported_by)
AS SELECT
    tenant_id, workspace_id, agent_id,
    toDate(recorded_at) AS day,
    model, reported_by,
    sum(input_tokens)  AS input_tokens,
    sum(output_tokens) AS output_tokens,
    sum(cache_read_tokens) AS cache_read_tokens,
    sum(cost_usd)      AS cost_usd,
    sum(bus_messages)  AS bus_messages,
    sum(bus_bytes_in + bus_bytes_out) AS bus_bytes
FROM agentbus.usage
GROUP BY tenant_id, workspace_id, agent_id, day, model, reported_by
;
CREATE MATERIALIZED VIEW IF NOT EXISTS agentbus.mv_edges_daily {on_cluster}
ENGINE = {replicated}SummingMergeTree({zk_edges})
PARTITION BY toYYYYMM(day)
ORDER BY (tenant_id, day, from_agent_id, to_agent_id, type)
SETTINGS allow_nullable_key = 1
AS SELECT
    tenant_id,
    toDate(event_time) AS day,
    from_agent_id, to_agent_id, type,
    count() AS messages,
    sum(payload_bytes) AS bytes,
    countIf(event = 'message.dead_lettered') AS dead_lettered,
    countIf(event = 'message.expired') AS expired
FROM agentbus.events
WHERE event IN ('message.accepted','message.dead_lettered','message.expired') AND to_agent_id IS NOT NULL
GROUP BY tenant_id, day, from_agent_id, to_agent_id, type
;
CREATE MATERIALIZED VIEW IF NOT EXISTS agentbus.mv_delivery_latency_hourly {on_cluster}
ENGINE = {replicated}AggregatingMergeTree({zk_latency})
PARTITION BY toYYYYMM(hour)
ORDER BY (tenant_id, hour)
AS SELECT
    tenant_id,
    toStartOfHour(event_time) AS hour,
    quantilesState(0.5, 0.95, 0.99)(latency_ms) AS accept_to_deliver_ms,
    countState() AS deliveries
FROM agentbus.events
WHERE event = 'message.delivered'
GROUP BY tenant_id, hour
