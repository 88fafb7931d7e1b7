"""``FastJSONResponse``: Starlette's ``JSONResponse`` encoded by ``platformkit.fastjson``
(orjson, the standard encoder for what orjson refuses), for routes whose answers are large and
frequent, such as a batch of deliveries."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from platformkit import fastjson

__all__ = ["FastJSONResponse"]


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        encoded = fastjson.dumps(content)
        return encoded if isinstance(encoded, bytes) else encoded.encode()
