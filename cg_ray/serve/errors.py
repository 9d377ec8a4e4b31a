"""One error body for every failing route:
`{"detail": {"error": str, "line": int | None, "field": str | None, "request_id": str | None}}`.

`line` is a 1-based line of an uploaded file (what an editor shows); `field` names the offending input
field, as a dotted path for JSON bodies (`metrics.epsilon`, `texts.3`). The explorer reads `detail.error`.
`request_id` is also the response's `X-Request-ID` header and the key of the server's log line. An
unexpected exception answers 500 with the request id only: no message, path or stack trace leaves the server.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from cg_ray.serve.edge import REQUEST_ID_HEADER, request_id_of
from cg_ray.serve.uploads import INVALID, MALFORMED, TOO_LARGE, UNSUPPORTED, UploadError

log = logging.getLogger(__name__)


class ErrorDetail(BaseModel):
    error: str
    line: int | None = None
    field: str | None = None
    request_id: str | None = None


class ErrorBody(BaseModel):
    detail: ErrorDetail


def api_error(
    status: int,
    message: str,
    *,
    line: int | None = None,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> HTTPException:
    """The exception a route raises; the handlers below turn it into the one error body."""
    return HTTPException(status, ErrorDetail(error=message, line=line, field=field).model_dump(), headers=headers)


# Ingestion errors get their HTTP status here, at the edge, and nowhere else.
UPLOAD_STATUS = {MALFORMED: 400, TOO_LARGE: 413, UNSUPPORTED: 415, INVALID: 422}


def upload_error(exc: UploadError) -> HTTPException:
    return api_error(UPLOAD_STATUS[exc.kind], str(exc), line=exc.line, field=exc.field)


def _body(request: Request, status: int, detail: ErrorDetail, headers: dict[str, str] | None = None) -> JSONResponse:
    detail.request_id = request_id_of(request.scope)
    log.info("request %s: %s %s -> %d %s", detail.request_id, request.method, request.url.path, status, detail.error)
    return JSONResponse({"detail": detail.model_dump()}, status_code=status, headers=headers)


async def _http_error(request: Request, exc: Any) -> JSONResponse:
    detail = exc.detail if isinstance(exc.detail, dict) else {"error": str(exc.detail)}
    return _body(request, exc.status_code, ErrorDetail.model_validate(detail), getattr(exc, "headers", None))


async def _validation_error(request: Request, exc: Any) -> JSONResponse:
    first = exc.errors()[0]
    # Drop FastAPI's location prefix ("body", "query"...): the field is what the client wrote.
    where = [str(p) for p in first.get("loc", ())[1:]]
    field = ".".join(where) or None
    message = f"{field}: {first['msg']}" if field else str(first["msg"])
    return _body(request, 422, ErrorDetail(error=message[:500], field=field))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """A bug, not the client's fault: the traceback goes to the log under the request id, never to the client."""
    request_id = request_id_of(request.scope)
    log.error("request %s: %s %s failed", request_id, request.method, request.url.path, exc_info=exc)
    detail = ErrorDetail(error=f"internal error; quote request id {request_id}", request_id=request_id)
    return JSONResponse({"detail": detail.model_dump()}, status_code=500, headers={REQUEST_ID_HEADER: request_id or ""})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
