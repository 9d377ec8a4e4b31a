"""The service's edge, before any route runs: a request id on every request and response, and the body size
limit, checked on `Content-Length` before a byte of the body is read and counted while it streams in.

The request id (`X-Request-ID` on every response, `detail.request_id` in every error body) is the one
thing a client quotes about a failure; the server's log has the rest under the same id.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-ID"


def request_id_of(scope: Scope) -> str | None:
    state = scope.get("state") or {}
    value = state.get("request_id") if isinstance(state, dict) else getattr(state, "request_id", None)
    return str(value) if value else None


def too_large(limit: int, request_id: str | None) -> dict[str, Any]:
    message = f"request body is over the {limit:,}-byte limit"
    return {"error": message, "line": None, "field": None, "request_id": request_id}


class EdgeMiddleware:
    """`body_limit(content_type)`: the largest body accepted for a request of that content type."""

    def __init__(self, app: ASGIApp, body_limit: Callable[[str], int]) -> None:
        self.app = app
        self.body_limit = body_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"req_{uuid.uuid4().hex[:16]}"
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append(REQUEST_ID_HEADER, request_id)
            await send(message)

        headers = Headers(scope=scope)
        limit = self.body_limit(headers.get("content-type", ""))
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            # Refused before the body is read or spooled: the client learns at once.
            log.info("request %s refused: Content-Length %s over %d", request_id, declared[:20], limit)
            status = 413 if declared.isdigit() else 400
            body = too_large(limit, request_id) if status == 413 else {"error": "invalid Content-Length"}
            response = JSONResponse({"detail": {"line": None, "field": None, "request_id": request_id, **body}}, status)
            await response(scope, receive, send_with_id)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # a chunked body, or one longer than it said
                    raise HTTPException(413, detail=too_large(limit, request_id))
            return message

        await self.app(scope, limited_receive, send_with_id)
