"""Where the gateway's agent paths keep things: the SQL of the aggregates they own (agents and
keys, conversations, messages, receipts, blobs; every function takes the tenant and runs in the
caller's tenant scope), the send path's short-lived copies of rows (``directory``) and the
object store of sealed payloads (``objectstore``)."""
