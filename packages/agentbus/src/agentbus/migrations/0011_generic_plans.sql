-- The functions of the hot paths plan their statements once per connection.
--
-- Their statements reach messages one key at a time by index or by TID (0010), so a generic
-- plan serves every call as well as a plan made for the call's values. But a statement whose
-- partitions can be pruned at planning gets a custom plan at every execution under the default
-- plan_cache_mode, and planning the partitioned table cost more than running the statement:
-- about 0.3 ms for each of record_receipts' two statements and for message_tids, per call,
-- against a few hundredths of a millisecond to execute them. The hot paths' own transactions
-- set the same mode for their statements (db.pipelined_transaction).
ALTER FUNCTION message_tids(uuid, uuid[], timestamptz[], message_status_t[])
    SET plan_cache_mode = force_generic_plan;

ALTER FUNCTION record_receipts(uuid, uuid, uuid[], uuid[], bigint[], timestamptz[], bytea[],
                               timestamptz[])
    SET plan_cache_mode = force_generic_plan;
