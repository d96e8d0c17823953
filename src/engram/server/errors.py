"""Every error becomes HTTP here, once: a status and ``{"error": {"type", "message", "field"}}``.

:data:`ERROR_STATUS` maps the :class:`~engram.errors.EngramError` tree to
statuses (the most specific class wins); request validation, unknown routes
and anything unexpected get the same body shape. The message says what is
wrong in words (:func:`explain`: a body that is not JSON, or not sent as
JSON, says so); ``field`` is the field at fault as a dotted path
(``messages.1.role``) whenever one is named. No stack trace ever leaves
the server: an unexpected exception is logged here and answered with a bare
``internal`` error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
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
    IdempotencyConflict,
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
    TurnNotFound,
)
from engram.proxy.budget import PromptTooLarge
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


class TooManyFailures(EngramError):
    """This address failed too many key checks lately (see :mod:`engram.server.throttle`)."""

    def __init__(self, retry_after: int, limit: int, window: float) -> None:
        """The refusal, with the seconds to wait and the limit that was reached."""
        super().__init__(
            f"too many wrong API keys from this address: try again in {retry_after} s "
            f"(at most {limit} failed key checks per {window:g} s)",
            field="Authorization",
        )
        self.retry_after = retry_after


#: (error class, HTTP status, error type), most specific first.
ERROR_STATUS: tuple[tuple[type[EngramError], int, str], ...] = (
    (NotAuthenticated, 401, "unauthenticated"),
    (TooManyFailures, 429, "too_many_failures"),
    (Forbidden, 403, "forbidden"),
    (PayloadTooLarge, 413, "payload_too_large"),
    (PromptTooLarge, 413, "prompt_too_large"),
    (NotReady, 503, "not_ready"),
    (DateParseError, 422, "invalid_date"),
    (InvalidMessage, 422, "invalid_message"),
    (IdempotencyConflict, 422, "idempotency_conflict"),
    (InvalidQuery, 422, "invalid_query"),
    (ImportFormatError, 422, "invalid_import"),
    (ConfigError, 422, "invalid_argument"),
    (SessionNotFound, 404, "session_not_found"),
    (MessageNotFound, 404, "message_not_found"),
    (MemoryNotFound, 404, "memory_not_found"),
    (TurnNotFound, 404, "turn_not_found"),
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
COMMON_ERRORS = (400, 401, 403, 404, 413, 422, 429, 503)


def status_of(exc: EngramError) -> tuple[int, str]:
    """The HTTP status and error type of an Engram error."""
    for kind, status, name in ERROR_STATUS:
        if isinstance(exc, kind):
            return status, name
    return 500, "internal"  # pragma: no cover - EngramError is the last row


def error_headers(exc: EngramError) -> dict[str, str]:
    """The headers an error's response carries: how to authenticate, when to retry."""
    if isinstance(exc, NotAuthenticated):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, TooManyFailures):
        return {"Retry-After": str(exc.retry_after)}
    return {}


def error_body(kind: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON body of every error response (a lone surrogate quoted from input is escaped)."""
    return {"error": {"type": kind, "message": _utf8(message), "field": _utf8(field)}}


def _utf8(text: str | None) -> str | None:
    """``text`` as UTF-8 can carry it: a lone surrogate becomes its backslash escape."""
    if text is None or text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


async def _engram_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngramError)
    status, kind = status_of(exc)
    if status >= 500:
        logger.error("%s %s failed: %s", request.method, request.url.path, exc)
    message = str(exc) if status < 500 or kind != "internal" else "internal error"
    headers = error_headers(exc)
    field = exc.field if isinstance(exc.field, str) and status < 500 else None
    if field is not None:
        field = _HEADERS.get(field) or dotted(field)
    return JSONResponse(
        error_body(kind, message, field),
        status_code=status,
        headers=headers,
    )


def dotted(field: str) -> str:
    """A library field path (``messages[1].content[0]``) as a request's loc path, dotted."""
    return _INDEX.sub(r".\1", field)


_INDEX = re.compile(r"\[(\d+)\]")
#: Library arguments that travel in a header over HTTP: the field names the header.
_HEADERS = {"idempotency_key": "Idempotency-Key"}
#: Where a request value comes from: the first part of a loc, not a field.
_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})
#: Names pydantic gives the members of a union in a loc (``content.str``): not fields.
_UNION_MEMBERS = frozenset(
    {"str", "int", "float", "bool", "bytes", "none", "list", "dict", "datetime", "date"}
)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message, field = explain(exc.errors(), exc.body)
    return JSONResponse(error_body("invalid_request", message, field), status_code=422)


def explain(errors: Sequence[Any], body: Any) -> tuple[str, str | None]:
    """What is wrong with a request, in words, and the field at fault (its loc path, dotted).

    ``errors`` are pydantic's (the first one is explained); ``body`` is the
    body as FastAPI read it: bytes when it was not sent as JSON.
    """
    first = errors[0] if errors else {}
    location = list(first.get("loc", ()))
    if first.get("type") == "json_invalid":
        text = body if isinstance(body, str) else ""
        position = location[1] if len(location) > 1 and isinstance(location[1], int) else 0
        return f"the body is not valid JSON: {_json_problem(first, text, position)}", None
    field = _field(location)
    if field is None and location[:1] == ["body"]:
        return _body_problem(body), None
    said = [str(e.get("msg", "")) for e in errors if _field(list(e.get("loc", ()))) == field]
    what = said[0] if said else str(first.get("msg", "invalid request"))
    for other in dict.fromkeys(said[1:]):  # the other members of a union, once each
        what += " or " + other.removeprefix("Input should be ")
    return (f"{field}: {what}" if field else what), field


def _field(location: list[Any]) -> str | None:
    """The dotted field of a loc: without its source, the append form and union members."""
    if location and location[0] in _SOURCES:
        location = location[1:]
    if location and location[0] in APPEND_FORMS:  # which form of a union body: not a field
        location = location[1:]
    parts = [
        str(part)
        for part in location
        if not (isinstance(part, str) and (part in _UNION_MEMBERS or "[" in part))
    ]
    return ".".join(parts) or None


def _json_problem(error: Mapping[str, Any], text: str, position: int) -> str:
    """The decoder's complaint with its line and column, as ``json`` says it."""
    line = text.count("\n", 0, position) + 1
    column = position - text.rfind("\n", 0, position)
    problem = (error.get("ctx") or {}).get("error") or "cannot be read"
    return f"{problem} at line {line} column {column}"


def _body_problem(body: Any) -> str:
    """Why a body that is no object of the route's shape was refused."""
    if isinstance(body, bytes | bytearray):
        return "send the body as JSON with Content-Type: application/json"
    if body is None:
        return (
            "the request needs a JSON object as its body (sent with Content-Type: application/json)"
        )
    if isinstance(body, bool):
        kind = "true" if body else "false"
    else:
        kind = "an array" if isinstance(body, list) else "a string" if isinstance(body, str) else ""
    return f"the body must be a JSON object, not {kind or 'a number'}"


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kinds = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}
    message = _unreadable(exc.__cause__) or str(exc.detail)
    return JSONResponse(
        error_body(kinds.get(exc.status_code, "http_error"), message),
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


def _unreadable(cause: BaseException | None) -> str | None:
    """Why a body could not be read at all (FastAPI says only "error parsing the body")."""
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not valid JSON: it is not UTF-8 text (byte offset {cause.start})"
    if isinstance(cause, RecursionError):
        return "the body is not valid JSON: it is nested too deeply to read"
    return None


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("%s %s raised an unexpected error", request.method, request.url.path)
    return JSONResponse(error_body("internal", "internal error"), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers: Engram errors, validation, HTTP errors, anything else."""
    app.add_exception_handler(EngramError, _engram_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
