"""What the API document says about inputs the library checks, so generated clients agree.

The library checks every field (:mod:`engram.intake.checks`, :mod:`engram.policy`,
:mod:`engram.memories.records`) and its refusals name the field in words; the
routes do not check twice. These fragments only *document* the same rules in
the OpenAPI schema (``json_schema_extra``), so a client generated from
``/openapi.json`` sends what the server accepts. What JSON Schema cannot say
(sizes in UTF-8 bytes, nesting depth, one field against another, what the
stored history must hold) is listed in the README, and the schemathesis
conformance test (``tests/server/test_openapi_fuzz.py``) holds the two together.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from engram.intake.blocks import REASONING_BLOCKS, TOOL_BLOCKS
from engram.intake.checks import (
    IMAGE_PARTS,
    MAX_CONTENT_PARTS,
    MAX_ID_CHARS,
    MAX_TOOL_CALLS,
    NAME_PATTERN,
)
from engram.intake.parts import TEXT_PARTS
from engram.memories.records import MAX_CONTENT_CHARS
from engram.models import IDEMPOTENCY_RECORD, ROLES
from engram.policy import policy_json_schema

#: Text Engram stores: no NUL character anywhere.
TEXT_PATTERN = r"^[^\x00]*$"
#: An id (scope, session, tool call) or other non-blank text: no NUL, one non-space at least.
ID_PATTERN = r"^[^\x00]*[^\s\x00][^\x00]*$"

#: A key sent in a header (``Idempotency-Key``): visible ASCII, spaces inside allowed.
HEADER_KEY: dict[str, Any] = {"pattern": r"^[\x20-\x7e]*[\x21-\x7e][\x20-\x7e]*$"}
#: A scope or session id.
ID: dict[str, Any] = {"pattern": ID_PATTERN}
#: Stored text.
TEXT: dict[str, Any] = {"pattern": TEXT_PATTERN}
#: A message's ``name``: OpenAI's rule, matched whole.
NAME: dict[str, Any] = {"pattern": f"^{NAME_PATTERN.pattern}$"}
#: A message's ``role``.
ROLE: dict[str, Any] = {"enum": sorted(ROLES)}
#: A policy, or null for the default: a preset name or an object of the policy's fields.
POLICY: dict[str, Any] = {"anyOf": [*policy_json_schema()["anyOf"], {"type": "null"}]}
#: The component every stored JSON value refers to (added by :func:`install`).
STORED_JSON = "StoredJson"
_STORED = {"$ref": f"#/components/schemas/{STORED_JSON}"}
#: Schemas added to the document's components.
COMPONENTS: dict[str, dict[str, Any]] = {
    STORED_JSON: {
        "description": "Plain JSON whose strings and keys hold no NUL character.",
        "anyOf": [
            {"type": "string", "pattern": TEXT_PATTERN},
            {"type": ["number", "boolean", "null"]},
            {"type": "array", "items": _STORED},
            {
                "type": "object",
                "propertyNames": {"pattern": TEXT_PATTERN},
                "additionalProperties": _STORED,
            },
        ],
    }
}
#: User metadata: stored JSON whose top-level keys are never Engram's reserved key.
METADATA: dict[str, Any] = {
    "propertyNames": {"pattern": TEXT_PATTERN, "not": {"const": IDEMPOTENCY_RECORD}},
    "additionalProperties": _STORED,
}
#: A tool call of an assistant message, as OpenAI's SDK sends it.
TOOL_CALL: dict[str, Any] = {
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, **ID},
        "type": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, **ID},
        "function": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, **ID},
                "arguments": {
                    "anyOf": [
                        {"type": "string", "pattern": TEXT_PATTERN},
                        {"type": "null"},
                        {
                            "type": "object",
                            "propertyNames": {"pattern": TEXT_PATTERN},
                            "additionalProperties": _STORED,
                        },
                    ]
                },
            },
            "required": ["name"],
        },
    },
    "required": ["id", "function"],
}

#: Non-blank stored text (a memory, a message that must say something).
NON_BLANK: dict[str, Any] = {"type": "string", "pattern": ID_PATTERN}
#: Unix seconds within the years 1-9999 in UTC (``created_at`` as a number; text is ISO).
UNIX_SECONDS_RANGE: dict[str, Any] = {"minimum": -62135596800, "maximum": 253402300799}
#: A long-term memory's text.
MEMORY_TEXT: dict[str, Any] = {
    "minLength": 1,
    "maxLength": MAX_CONTENT_CHARS,
    "pattern": ID_PATTERN,
}
_ABSENT: dict[str, Any] = {"type": "null"}
_NO_CALLS: dict[str, Any] = {"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0}]}
_CALLS: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_TOOL_CALLS,
    "items": {"type": "object", **TOOL_CALL},
}
_PART: dict[str, Any] = {
    "type": "object",
    "anyOf": [
        {
            "properties": {"type": {"enum": sorted(TEXT_PARTS)}, "text": NON_BLANK},
            "required": ["type", "text"],
        },
        {
            "properties": {"type": {"const": "refusal"}, "refusal": NON_BLANK},
            "required": ["type", "refusal"],
        },
        {  # images and Anthropic blocks: their rules are in the README's Limits
            "properties": {"type": {"enum": sorted(IMAGE_PARTS | TOOL_BLOCKS | REASONING_BLOCKS)}},
            "required": ["type"],
        },
    ],
}
_SAYS: dict[str, Any] = {
    "anyOf": [
        NON_BLANK,
        {"type": "array", "minItems": 1, "maxItems": MAX_CONTENT_PARTS, "items": _PART},
    ]
}


def _role(role: str, required: tuple[str, ...], **fields: dict[str, Any]) -> dict[str, Any]:
    return {"properties": {"role": {"const": role}, **fields}, "required": ["role", *required]}


#: What each role's message must (and may not) carry, as the library checks it.
MESSAGE_ROLES: dict[str, Any] = {
    "anyOf": [
        _role("user", ("content",), content=_SAYS, tool_calls=_NO_CALLS, tool_call_id=_ABSENT),
        _role("system", ("content",), content=_SAYS, tool_calls=_NO_CALLS, tool_call_id=_ABSENT),
        _role("assistant", ("content",), content=_SAYS, tool_calls=_NO_CALLS, tool_call_id=_ABSENT),
        _role("assistant", ("tool_calls",), tool_calls=_CALLS, tool_call_id=_ABSENT),
        _role(
            "tool",
            ("content", "tool_call_id"),
            content=_SAYS,
            tool_calls=_NO_CALLS,
            tool_call_id={"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, **ID},
        ),
    ]
}


#: The proxy's body: an OpenAI chat completion request (OpenAI's reference has every field).
CHAT_REQUEST: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "An OpenAI chat completion request: model, messages and "
                    "OpenAI's optional fields, passed on to the upstream.",
                    "properties": {
                        "model": {"type": "string", "minLength": 1},
                        "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
                    },
                    "required": ["model", "messages"],
                }
            }
        },
    }
}


def _proxied(description: str, required: dict[str, Any]) -> dict[str, Any]:
    """The documented body of a proxy route: the fields Engram needs, the rest passed on."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "description": description,
                        "properties": required,
                        "required": list(required),
                    }
                }
            },
        }
    }


#: ``POST /v1/responses``: an OpenAI Responses request.
RESPONSES_REQUEST = _proxied(
    "An OpenAI Responses request: model, input (text or items) and the API's optional "
    "fields, passed on to the upstream.",
    {
        "model": {"type": "string", "minLength": 1},
        "input": {
            "oneOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "items": {"type": "object"}},
            ]
        },
    },
)
#: ``POST /v1/messages``: an Anthropic Messages request.
MESSAGES_REQUEST = _proxied(
    "An Anthropic Messages request: model, max_tokens, messages and the API's optional "
    "fields, passed on to the Anthropic-format upstream.",
    {
        "model": {"type": "string", "minLength": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
    },
)


def install(app: FastAPI) -> None:
    """Add :data:`COMPONENTS` to ``app``'s API document when it is first built."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            document.setdefault("components", {}).setdefault("schemas", {}).update(COMPONENTS)
        return app.openapi_schema or {}

    app.openapi = openapi  # type: ignore[method-assign]
