"""The HTTP edge of the gateway: routes (FastAPI routers and the plain hot routes), who is
calling (``auth``, ``principals``, ``operator``), request bodies, response shapes and headers,
request rates and the hot routes' OpenAPI description."""
