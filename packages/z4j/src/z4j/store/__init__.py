"""SQL of z4j, one module per aggregate; tenant-table functions take the project scope."""
