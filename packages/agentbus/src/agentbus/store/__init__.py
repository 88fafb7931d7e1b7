"""SQL, one module per aggregate. Functions take a connection; every function on a tenant table
takes the tenant id and expects to run inside ``tenant_transaction(pool, SCOPE, tenant_id)``,
so row-level security and the explicit ``tenant_id`` predicate agree. Rows are dicts with uuid
ids; text ids (``ten_...``) are made at the edges with ``agentbus.ids``."""
