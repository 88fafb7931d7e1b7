"""The migrated schema is the data model's §1 and §5.1: every table and column with its type and
nullability, the enums, the indexes, the roles, row-level security and the extensions."""

from __future__ import annotations

import re

import psycopg
import pytest

# The model's tables as written in agentbus-data-model.md §1 and §5.1 ("!" = NOT NULL), then
# its §2.4 usage and model_pricing, which this deployment keeps in PostgreSQL (decisions/0031),
# the A2A bridges of decisions/0032, §2.5's audit_chain with its heads (decisions/0048), the
# analytics outbox of decisions/0050 and its event cursors (decisions/0065), the console's
# sign-in of decisions/0051, and its §2.3 events (decisions/0047).
MODEL_TEXT = """
    tenants: id uuid!, slug text!, display_name text!, plan plan_t!, status tenant_status_t!,
        region text!, retention_days int!, nats_stream text!, nats_account text, kek_ref text!,
        custom_domain text, settings jsonb!, created_at timestamptz!, updated_at timestamptz!,
        deleted_at timestamptz
    workspaces: id uuid!, tenant_id uuid!, slug text!, display_name text!, description text,
        settings jsonb!, created_at timestamptz!, deleted_at timestamptz
    users: id uuid!, tenant_id uuid!, idp text!, idp_subject text!, email text!,
        display_name text, status text!, created_at timestamptz!, last_login_at timestamptz
    tenant_memberships: tenant_id uuid!, user_id uuid!, role tenant_role_t!,
        created_at timestamptz!
    workspace_memberships: tenant_id uuid!, workspace_id uuid!, user_id uuid!, role ws_role_t!,
        invited_by uuid, created_at timestamptz!
    invitations: id uuid!, tenant_id uuid!, workspace_id uuid, email text!, role ws_role_t!,
        token_hash bytea!, invited_by uuid!, expires_at timestamptz!, accepted_at timestamptz,
        created_at timestamptz!
    integration_tokens: id uuid!, tenant_id uuid!, workspace_id uuid, owner_user_id uuid!,
        name text!, env text!, token_hash bytea!, prefix text!, last4 text!, scopes text[]!,
        expires_at timestamptz, last_used_at timestamptz, last_used_ip inet,
        revoked_at timestamptz, revoked_reason text, created_at timestamptz!
    signing_keys: kid text!, alg text!, public_key bytea!, private_key_enc bytea!,
        active boolean!, created_at timestamptz!, retired_at timestamptz
    agents: id uuid!, tenant_id uuid!, workspace_id uuid!, owner_user_id uuid!, name text!,
        address text!, display_name text, description text!, capabilities jsonb!,
        agent_card jsonb!, harness harness_t!, harness_version text, mode text!,
        visibility visibility_t!, status agent_status_t!, nats_consumer text!,
        inbox_subject text!, delivery jsonb!, last_seen_at timestamptz, last_host text,
        created_at timestamptz!, updated_at timestamptz!, deleted_at timestamptz
    agent_keys: id uuid!, tenant_id uuid!, agent_id uuid!, public_key bytea!, fingerprint text!,
        spiffe_id text!, created_at timestamptz!, expires_at timestamptz!,
        revoked_at timestamptz
    conversations: id uuid!, tenant_id uuid!, workspace_id uuid!, started_by uuid!, title text,
        participants uuid[]!, message_count int!, last_message_at timestamptz,
        created_at timestamptz!
    messages: id uuid!, tenant_id uuid!, workspace_id uuid!, conversation_id uuid!, type text!,
        schema_url text!, from_agent_id uuid!, to_agent_id uuid, to_address text!,
        correlation_id uuid, reply_to text, idempotency_key text, capability text,
        capability_ver text, priority text!, budget jsonb, expires_at timestamptz,
        traceparent text!, trace_id text, sig bytea!, signing_key_id uuid!, payload_ref text!,
        payload_bytes int!, payload_sha256 bytea!, dek_version int!, status message_status_t!,
        stream_seq bigint, attempts int!, bridged_from uuid, accepted_at timestamptz!,
        delivered_at timestamptz, read_at timestamptz
    tasks: id uuid!, tenant_id uuid!, workspace_id uuid!, conversation_id uuid!,
        request_msg_id uuid!, requester_agent_id uuid!, recipient_agent_id uuid!,
        idempotency_key text!, capability text!, capability_ver text!, state task_state_t!,
        budget jsonb, spent numeric(12,6)!, grant_id uuid, result_msg_id uuid, error_code text,
        progress jsonb, submitted_at timestamptz!, delivered_at timestamptz,
        accepted_at timestamptz, started_at timestamptz, finished_at timestamptz,
        expires_at timestamptz, duration_ms bigint
    task_transitions: id uuid!, tenant_id uuid!, task_id uuid!, from_state task_state_t,
        to_state task_state_t!, by_msg_id uuid, reason text, at timestamptz!
    delivery_state: tenant_id uuid!, msg_id uuid!, agent_id uuid!, attempt int!,
        last_fetched_at timestamptz, transport_acked_at timestamptz,
        application_acked_at timestamptz, nak_until timestamptz, dlq_reason text
    receipts: id uuid!, tenant_id uuid!, msg_id uuid!, stream_seq bigint, issued_to_token uuid!,
        issued_at timestamptz!, signature bytea!
    policies: id uuid!, tenant_id uuid!, workspace_id uuid, name text!, version int!,
        cedar text!, enabled boolean!, created_by uuid!, created_at timestamptz!
    grants: id uuid!, tenant_id uuid!, publisher_agent_id uuid!, consumer_tenant_id uuid!,
        consumer_ws_id uuid, consumer_agent_id uuid, allowed_types text[]!, capabilities text[]!,
        rate_per_minute int!, pricing jsonb, approval text!, status grant_status_t!,
        requested_by uuid, approved_by uuid, starts_at timestamptz!, expires_at timestamptz,
        created_at timestamptz!
    blobs: id uuid!, tenant_id uuid!, uploaded_by uuid!, s3_key text!, content_type text!,
        size_bytes bigint!, sha256 bytea!, dek_version int!, ref_count int!,
        expires_at timestamptz!, created_at timestamptz!
    audit_actions: id uuid!, tenant_id uuid, actor_type text!, actor_id text!, action text!,
        target_type text, target_id text, consent_ref uuid, details jsonb!, ip inet,
        user_agent text, at timestamptz!
    support_consents: id uuid!, tenant_id uuid!, granted_by uuid!, scope jsonb!,
        starts_at timestamptz!, ends_at timestamptz!, revoked_at timestamptz, ticket_ref text
    plans: code plan_t!, limits jsonb!
    subscriptions: id uuid!, tenant_id uuid!, plan plan_t!, billing_ref text, status text!,
        current_period_start timestamptz, current_period_end timestamptz, overrides jsonb!,
        created_at timestamptz!
    tenant_keys: tenant_id uuid!, version int!, dek_wrapped bytea!, kek_ref text!,
        kek_provider text!, status text!, created_at timestamptz!, retired_at timestamptz
    usage: usage_id uuid!, recorded_at timestamptz!, tenant_id uuid!, workspace_id uuid!,
        agent_id uuid!, task_id uuid, message_id uuid, conversation_id uuid, harness text!,
        provider text!, model text!, input_tokens bigint!, output_tokens bigint!,
        cache_read_tokens bigint!, cache_write_tokens bigint!, reasoning_tokens bigint!,
        cost_usd numeric(14,6)!, cost_source text!, reported_by text!, confidence text!,
        bus_bytes_in bigint!, bus_bytes_out bigint!, bus_messages int!, duration_ms bigint,
        details jsonb!
    model_pricing: provider text!, model text!, effective_from date!,
        input_per_mtok numeric(10,4)!, output_per_mtok numeric(10,4)!,
        cache_read_per_mtok numeric(10,4)!, cache_write_per_mtok numeric(10,4)!
    a2a_bridges: tenant_id uuid!, workspace_id uuid!, agent_id uuid!, key_id uuid!,
        private_key_enc bytea!, created_at timestamptz!
    audit_chain: tenant_id uuid!, seq bigint!, at timestamptz!, event_id uuid!, event_kind text!,
        actor text!, summary text!, prev_hash bytea!, row_hash bytea!, signature bytea,
        event_digest bytea, signing_kid text
    audit_heads: tenant_id uuid!, seq bigint!, row_hash bytea!, checkpoint_seq bigint!,
        checkpoint_at timestamptz, published_seq bigint!
    analytics_outbox: tenant_id uuid!, seq bigint!, target text!, row jsonb!,
        queued_at timestamptz!
    analytics_event_cursors: tenant_id uuid!, event_id uuid!, updated_at timestamptz!
    console_sign_in_links: id uuid!, tenant_id uuid!, user_id uuid!, token_hash bytea!,
        created_at timestamptz!, expires_at timestamptz!, used_at timestamptz
    console_sessions: id uuid!, tenant_id uuid!, user_id uuid!, secret_hash bytea!,
        created_at timestamptz!, expires_at timestamptz!, revoked_at timestamptz
    events: event_id uuid!, event_time timestamptz!, event text!, tenant_id uuid!,
        workspace_id uuid!, message_id uuid!, conversation_id uuid!, task_id uuid,
        trace_id text!, span_id text!, from_agent_id uuid!, to_agent_id uuid, type text!,
        capability text, attempt smallint!, actor text!, payload_bytes bigint!,
        latency_ms bigint, error_code text, policy_id uuid, bridged_from uuid, details jsonb!,
        ingested_at timestamptz!
"""
TYPE_NAMES = {"timestamptz": "timestamp with time zone", "int": "integer"}

ENUMS = {
    "plan_t": ["starter", "business", "enterprise"],
    "tenant_status_t": ["active", "suspended", "deleting", "deleted"],
    "tenant_role_t": ["owner", "admin", "member", "auditor", "billing"],
    "ws_role_t": ["admin", "member", "viewer"],
    "visibility_t": ["private", "workspace", "tenant", "public"],
    "agent_status_t": ["registered", "online", "idle", "offline", "disabled", "deleted"],
    "harness_t": ["claude", "codex", "opencode", "gemini", "custom"],
    "message_status_t": [
        "accepted",
        "fetched",
        "delivered",
        "read",
        "expired",
        "dead_lettered",
        "discarded",
        "bridged",
    ],
    "task_state_t": [
        "submitted",
        "delivered",
        "accepted",
        "in_progress",
        "completed",
        "failed",
        "rejected",
        "cancelled",
        "expired",
    ],
    "grant_status_t": ["requested", "active", "suspended", "revoked", "expired"],
}

# Every index the model creates: (table, fragments that must all be in one pg_get_indexdef).
INDEXES = [
    ("integration_tokens", ["(tenant_id, owner_user_id) WHERE (revoked_at IS NULL)"]),
    ("agents", ["(tenant_id, workspace_id) WHERE (deleted_at IS NULL)"]),
    ("agents", ["USING gin (capabilities jsonb_path_ops)"]),
    ("agent_keys", ["(agent_id) WHERE (revoked_at IS NULL)"]),
    ("conversations", ["(tenant_id, last_message_at DESC)"]),
    ("messages", ["UNIQUE INDEX messages_id_uq ON ONLY", "(tenant_id, id, accepted_at)"]),
    ("messages", ["messages_to_status ON ONLY", "(to_agent_id, status, accepted_at) WHERE",
                  "'accepted'::message_status_t, 'fetched'::message_status_t, 'delivered'"]),
    ("messages", ["messages_conv ON ONLY", "(conversation_id, accepted_at)"]),
    ("messages", ["messages_trace ON ONLY", "(trace_id)"]),
    ("messages", ["messages_unpublished ON ONLY", "(accepted_at) WHERE (stream_seq IS NULL)"]),
    ("tasks", ["(tenant_id, state, submitted_at DESC)"]),
    ("tasks", ["(recipient_agent_id, state) WHERE", "'submitted'::task_state_t, "
               "'delivered'::task_state_t, 'accepted'::task_state_t, 'in_progress'"]),
    ("task_transitions", ["(task_id, at)"]),
    ("receipts", ["(msg_id)"]),
    ("grants", ["(consumer_tenant_id, status)"]),
    ("audit_actions", ["(tenant_id, at DESC)"]),
    ("usage", ["(tenant_id, recorded_at, agent_id)"]),
    ("events", ["(tenant_id, message_id, event_id)"]),
]  # fmt: skip
PLATFORM_TABLES = {"plans", "signing_keys", "model_pricing"}


def model() -> dict[str, dict[str, tuple[str, bool]]]:
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for entry in re.sub(r",\n\s+", ", ", MODEL_TEXT).strip().splitlines():
        table, _, columns = entry.strip().partition(": ")
        out[table] = {}
        for column in columns.split(", "):
            name, typ = column.split(" ", 1)
            not_null = typ.endswith("!")
            typ = typ.rstrip("!")
            out[table][name] = (TYPE_NAMES.get(typ, typ), not_null)
    return out


def test_model_text_parses() -> None:
    tables = model()
    assert len(tables) == 34
    assert len(tables["messages"]) == 32
    assert len(tables["tasks"]) == 24


def test_every_table_and_column_has_the_models_type(agentbus_shared_db: str) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        live: dict[str, dict[str, tuple[str, bool]]] = {}
        for table, column, typ, not_null in conn.execute(
            """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
               FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
               JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                 AND a.attnum > 0 AND NOT a.attisdropped"""
        ).fetchall():
            live.setdefault(table, {})[column] = (typ, not_null)
    problems = []
    for table, columns in model().items():
        if table not in live:
            problems.append(f"missing table {table}")
            continue
        for column, expected in columns.items():
            found = live[table].get(column)
            if found != expected:
                problems.append(f"{table}.{column}: model {expected}, database {found}")
        extra = set(live[table]) - set(columns)
        if extra:
            problems.append(f"{table}: columns not in the model {sorted(extra)}")
    assert problems == []


def test_enums_have_the_models_labels(agentbus_shared_db: str) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        rows = conn.execute(
            """SELECT t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder)
               FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid
               JOIN pg_namespace n ON n.oid = t.typnamespace
               WHERE n.nspname = 'public' GROUP BY t.typname"""
        ).fetchall()
    assert dict(rows) == ENUMS


@pytest.mark.parametrize(("table", "fragments"), INDEXES)
def test_model_indexes_exist(agentbus_shared_db: str, table: str, fragments: list[str]) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        defs = [
            r[0]
            for r in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = %s",
                (table,),
            ).fetchall()
        ]
    assert any(all(f in d for f in fragments) for d in defs), defs


def test_messages_is_partitioned_by_range_on_accepted_at(agentbus_shared_db: str) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        key = conn.execute("SELECT pg_get_partkeydef('public.messages'::regclass)").fetchone()
        pk = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'public.messages'::regclass AND contype = 'p'"
        ).fetchone()
    assert key == ("RANGE (accepted_at)",)
    assert pk == ("PRIMARY KEY (tenant_id, accepted_at, id)",)


def test_roles_and_ownership(agentbus_shared_db: str) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        roles = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT rolname, rolcanlogin, rolsuper, rolbypassrls FROM pg_roles"
                " WHERE rolname LIKE 'agentbus\\_%'"
            ).fetchall()
        }
        owners = {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        }
    for role in ("agentbus_owner", "agentbus_app", "agentbus_support"):
        assert roles[role] == (True, False, False), role
    assert owners == {"agentbus_owner"}


def test_every_tenant_table_forces_rls_with_the_models_policies(agentbus_shared_db: str) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        tables = conn.execute(
            """SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
                      (SELECT array_agg(polname::text ORDER BY polname) FROM pg_policy
                        WHERE polrelid = c.oid)
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                 AND c.relname <> 'schema_migrations'"""
        ).fetchall()
    tenant_tables = set(model()) - PLATFORM_TABLES
    for name, enabled, forced, policies in tables:
        if name in PLATFORM_TABLES:
            assert not enabled, name
            assert not policies, name
            continue
        assert name in tenant_tables
        assert enabled, name
        assert forced, name
        assert {"tenant_isolation", "support_read", "support_consent_required"} <= set(policies)
    assert {t[0] for t in tables} == set(model())


def test_extensions_queue_and_plans(agentbus_shared_db: str) -> None:
    with psycopg.connect(agentbus_shared_db) as conn:
        exts = {r[0] for r in conn.execute("SELECT extname FROM pg_extension").fetchall()}
        queues = [r[0] for r in conn.execute("SELECT queue_name FROM absurd.queues")]
        plans: dict[str, dict[str, int]] = dict(
            conn.execute("SELECT code::text, limits FROM plans").fetchall()
        )
    assert "btree_gist" in exts
    assert "pgcrypto" not in exts
    assert "agentbus" in queues
    assert plans["starter"] == {
        "workspaces": 1,
        "agents": 10,
        "retention_days": 7,
        "pending_per_agent": 1000,
        "stream_bytes": 1073741824,
        "publish_per_minute": 60,
        "blob_bytes": 104857600,
    }
    assert plans["business"]["retention_days"] == 90
    assert plans["enterprise"]["agents"] == 2000
