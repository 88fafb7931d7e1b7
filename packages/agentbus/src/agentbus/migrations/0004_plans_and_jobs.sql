-- Seed rows of plans (05-DELIVERY-SEMANTICS §11: starter values are the data model's, business
-- and enterprise values are the seed rows) and the absurd queue of the gateway's durable jobs.

INSERT INTO plans (code, limits) VALUES
    ('starter', '{"workspaces": 1, "agents": 10, "retention_days": 7,
                  "pending_per_agent": 1000, "stream_bytes": 1073741824,
                  "publish_per_minute": 60, "blob_bytes": 104857600}'),
    ('business', '{"workspaces": 20, "agents": 200, "retention_days": 90,
                   "pending_per_agent": 10000, "stream_bytes": 21474836480,
                   "publish_per_minute": 600, "blob_bytes": 1073741824}'),
    ('enterprise', '{"workspaces": 200, "agents": 2000, "retention_days": 90,
                     "pending_per_agent": 50000, "stream_bytes": 214748364800,
                     "publish_per_minute": 3000, "blob_bytes": 5368709120}');

SELECT absurd.create_queue('agentbus');
