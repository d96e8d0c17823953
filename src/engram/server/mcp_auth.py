"""Who may use ``/mcp``, which scope they get, and refusals an MCP client can read.

``/mcp`` is an OAuth 2.1 resource server (RFC 9728): it publishes its Protected
Resource Metadata at ``/.well-known/oauth-protected-resource/mcp`` and answers a
request without a valid token ``401`` with ``WWW-Authenticate: Bearer
resource_metadata="..."``. The accepted bearer tokens:

* the server's API keys, checked exactly as on every ``/v1`` route;
* any other token, when the operator plugs a token verifier
  (``ServerSettings.mcp_token_verifier``: the MCP SDK's ``TokenVerifier``, for
  an OAuth authorization server's tokens). The token's scopes give the
  rights: ``engram:admin``, ``engram:scope:<name>`` (one per scope reached)
  and ``engram:read-only``.

Every refusal is a JSON-RPC error in the body (with the HTTP status), so the
official client shows its message, and the message names the fix: the
``Authorization`` header, the ``X-Engram-Scope`` header, the key's scopes.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engram.errors import EngramError
from engram.intake.validation import check_id
from engram.models import ApiKeyRecord
from engram.server.auth import Caller
from engram.server.deps import bearer_secret, key_failed, resolve_caller
from engram.server.errors import Forbidden, NotAuthenticated, error_headers, status_of

#: Where the metadata of ``/mcp`` is published (RFC 9728: the well-known prefix, then the path).
METADATA_PATH = "/.well-known/oauth-protected-resource"
#: The header naming the scope a request works in.
SCOPE_HEADER = "X-Engram-Scope"
#: The scope of local mode (no key in the store) when the request names none.
LOCAL_SCOPE = "default"
#: Token scopes an operator's verifier may grant.
ADMIN_SCOPE = "engram:admin"
READ_ONLY_SCOPE = "engram:read-only"
SCOPE_PREFIX = "engram:scope:"
#: JSON-RPC code of every refusal (the HTTP status and ``data.kind`` tell them apart).
REFUSED = -32600


async def mcp_caller(request: Request) -> Caller:
    """The caller of an MCP request: an API key, else the operator's token verifier.

    Raises:
        NotAuthenticated: no key, or a token neither check accepts.

    """
    secret = bearer_secret(request)
    verifier = getattr(request.app.state.settings, "mcp_token_verifier", None)
    try:
        return await resolve_caller(request, secret, last=verifier is None)
    except NotAuthenticated:
        if verifier is None or secret is None:
            raise
        access = await verifier.verify_token(secret)
        if access is None or (access.expires_at and access.expires_at < time.time()):
            key_failed(request)
            raise NotAuthenticated("unknown, expired or revoked token") from None
        return token_caller(access)


def token_caller(access: Any) -> Caller:
    """The rights an operator's token grants (see the module docs for its scopes)."""
    granted = list(access.scopes or [])
    record = ApiKeyRecord(
        id=0,
        prefix="token",
        label=f"token of {access.client_id}",
        admin=ADMIN_SCOPE in granted,
        scopes=tuple(s.removeprefix(SCOPE_PREFIX) for s in granted if s.startswith(SCOPE_PREFIX)),
        writable=READ_ONLY_SCOPE not in granted,
        created_at=datetime.now(UTC),
    )
    return Caller(record)


def chosen_scope(caller: Caller, named: str | None) -> str:
    """The scope a request works in: the one named in ``X-Engram-Scope``, else the key's own.

    Raises:
        Forbidden: the named scope is out of the key's reach, or the key reaches
            several scopes (an admin key reaches all) and the request names none.
        InvalidQuery: a named scope that is not a valid id.

    """
    key = caller.key
    reach = "every scope" if key is None or key.admin else ", ".join(map(repr, key.scopes))
    if named:
        scope = check_id("scope", named)
        if not caller.may(scope, write=False):
            raise Forbidden(
                f"this key does not reach scope {scope!r} (named by {SCOPE_HEADER}); it reaches"
                f" {reach}: send {SCOPE_HEADER} with one of them, or a key for {scope!r}"
            )
        return scope
    if key is None:
        return LOCAL_SCOPE  # local mode: this machine only, every scope
    if key.admin:
        raise Forbidden(
            f"an admin key reaches every scope: name the one to serve in the {SCOPE_HEADER} header"
        )
    if len(key.scopes) == 1:
        return key.scopes[0]
    raise Forbidden(
        f"this key reaches several scopes ({reach}): name one in the {SCOPE_HEADER} header"
    )


async def refusal(request: Request, exc: EngramError) -> Response:
    """The response refusing an MCP request: its HTTP status, a JSON-RPC error body.

    A ``401`` also says where the resource's metadata is (``WWW-Authenticate``).
    """
    status, kind = status_of(exc)
    message = str(exc)
    headers = error_headers(exc)
    headers.pop("WWW-Authenticate", None)  # the challenge below names the metadata
    if isinstance(exc, NotAuthenticated):
        make = "engram keys create --scope NAME makes one"
        if "Bearer" in message:
            message += f" ({make})"
        else:
            message += f" (an MCP client sends it as the header Authorization: Bearer KEY; {make})"
        challenge = f'Bearer resource_metadata="{metadata_url(request)}"'
        if bearer_secret(request) is not None:
            challenge += ', error="invalid_token"'
        headers["WWW-Authenticate"] = challenge
    body = {
        "jsonrpc": "2.0",
        "id": await _request_id(request),
        "error": {"code": REFUSED, "message": message, "data": {"kind": kind, "status": status}},
    }
    return JSONResponse(body, status_code=status, headers=headers)


def resource_url(request: Request, path: str) -> str:
    """The URL clients reach the endpoint at ``path`` by (``public_url``, else the request's)."""
    return _base(request) + path


def metadata_url(request: Request, path: str = "/mcp") -> str:
    """Where the Protected Resource Metadata of the MCP endpoint is published."""
    return f"{_base(request)}{METADATA_PATH}{path}"


def _base(request: Request) -> str:
    public = getattr(request.app.state.settings, "public_url", None)
    return str(public or request.base_url).rstrip("/")


def metadata(request: Request, path: str = "/mcp") -> dict[str, Any]:
    """The endpoint's Protected Resource Metadata (RFC 9728)."""
    settings = request.app.state.settings
    document: dict[str, Any] = {
        "resource": resource_url(request, path),
        "bearer_methods_supported": ["header"],
        "resource_name": "Engram MCP server",
    }
    servers = list(getattr(settings, "mcp_authorization_servers", ()) or ())
    if servers:
        document["authorization_servers"] = servers
        document["scopes_supported"] = [ADMIN_SCOPE, READ_ONLY_SCOPE, f"{SCOPE_PREFIX}<scope>"]
    return document


async def _request_id(request: Request) -> Any:
    """The JSON-RPC id of the refused request, when its body is one request."""
    if request.method != "POST":
        return None
    try:
        decoded = json.loads(await request.body())
    except (ValueError, RuntimeError):
        return None
    found = decoded.get("id") if isinstance(decoded, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None
