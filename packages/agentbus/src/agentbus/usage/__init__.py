"""Usage and cost (data model §2.4, 04-API-SPEC §9): ``POST /v1/usage``, ``model_pricing``,
and the task budgets that reported spend is held to."""
