"""Every error becomes HTTP here, once: a status and ``{"error": {"type", "message", "field"}}``.

:data:`ERROR_STATUS` maps the :class:`~engram.errors.EngramError` tree to
statuses (the most specific class wins); request validation, unknown routes
and anything unexpected get the same body shape. No stack trace ever leaves
the server: an unexpected exception is logged here and answered with a bare
``internal`` error.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engram.errors import (
    ConfigError,
    ConnectionLost,
    Contention,
    DateParseError,
    EngramError,
    ImportFormatError,
    InvalidMessage,
    InvalidQuery,
    LLMError,
    LLMTimeout,
    MemoryNotFound,
    MessageNotFound,
    MissingDependency,
    NotFound,
    SessionNotFound,
    StoreError,
)
from engram.server.schemas import APPEND_FORMS

logger = logging.getLogger("engram.server")


class NotAuthenticated(EngramError):
    """No API key, or one that is unknown or revoked."""


class Forbidden(EngramError):
    """The key is valid but does not give this right (scope, write, admin)."""


class PayloadTooLarge(EngramError):
    """The request body is larger than the server accepts."""


class NotReady(EngramError):
    """The server cannot serve yet (its store does not answer)."""


#: (error class, HTTP status, error type), most specific first.
ERROR_STATUS: tuple[tuple[type[EngramError], int, str], ...] = (
    (NotAuthenticated, 401, "unauthenticated"),
    (Forbidden, 403, "forbidden"),
    (PayloadTooLarge, 413, "payload_too_large"),
    (NotReady, 503, "not_ready"),
    (DateParseError, 422, "invalid_date"),
    (InvalidMessage, 422, "invalid_message"),
    (InvalidQuery, 422, "invalid_query"),
    (ImportFormatError, 422, "invalid_import"),
    (ConfigError, 422, "invalid_argument"),
    (SessionNotFound, 404, "session_not_found"),
    (MessageNotFound, 404, "message_not_found"),
    (MemoryNotFound, 404, "memory_not_found"),
    (NotFound, 404, "not_found"),
    (Contention, 409, "conflict"),
    (ConnectionLost, 503, "store_unavailable"),
    (StoreError, 500, "store_error"),
    (LLMTimeout, 504, "llm_timeout"),
    (LLMError, 502, "llm_error"),
    (MissingDependency, 501, "missing_dependency"),
    (EngramError, 500, "internal"),
)

#: Statuses any route may answer besides its success, documented on every route.
COMMON_ERRORS = (400, 401, 403, 404, 413, 422, 503)


def status_of(exc: EngramError) -> tuple[int, str]:
    """The HTTP status and error type of an Engram error."""
    for kind, status, name in ERROR_STATUS:
        if isinstance(exc, kind):
            return status, name
    return 500, "internal"  # pragma: no cover - EngramError is the last row


def error_body(kind: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"error": {"type": kind, "message": message, "field": field}}


async def _engram_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngramError)
    status, kind = status_of(exc)
    if status >= 500:
        logger.error("%s %s failed: %s", request.method, request.url.path, exc)
    message = str(exc) if status < 500 or kind != "internal" else "internal error"
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    field = getattr(exc, "field", None)
    return JSONResponse(
        error_body(kind, message, field if isinstance(field, str) else None),
        status_code=status,
        headers=headers,
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    location = [str(part) for part in first.get("loc", ())]
    if location and location[0] in {"body", "query", "path", "header"}:
        location = location[1:]
    if location and location[0] in APPEND_FORMS:  # which form of a union body: not a field
        location = location[1:]
    field = ".".join(location) or None
    message = str(first.get("msg", "invalid request"))
    if field:
        message = f"{field}: {message}"
    return JSONResponse(error_body("invalid_request", message, field), status_code=422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kinds = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}
    return JSONResponse(
        error_body(kinds.get(exc.status_code, "http_error"), str(exc.detail)),
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("%s %s raised an unexpected error", request.method, request.url.path)
    return JSONResponse(error_body("internal", "internal error"), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers: Engram errors, validation, HTTP errors, anything else."""
    app.add_exception_handler(EngramError, _engram_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
