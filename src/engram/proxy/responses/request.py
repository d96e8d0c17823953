"""A Responses request, read once, as the chat-completions request Engram's turn runs.

``input`` (text, or a list of items: :mod:`~engram.proxy.responses.items`)
becomes the chat messages; ``instructions`` the system prompt; function
tools, ``tool_choice``, ``max_output_tokens`` (the reply reserve),
``text.format`` (a JSON schema), ``reasoning.effort``, ``temperature``,
``top_p``, ``parallel_tool_calls``, ``user``, ``metadata``,
``prompt_cache_key``, ``safety_identifier`` and ``service_tier`` their chat
equivalents; other fields go upstream as they are. Options with no chat
equivalent (``include``, ``truncation``, ``reasoning.summary``,
``top_logprobs``, ``stream_options``, ``context_management``...) are
dropped; tools other than functions, ``background`` and stored ``prompt``
templates are refused, naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engram.models import JSON
from engram.proxy.request import ChatRequest, InvalidRequest, parse_request
from engram.proxy.responses.items import chat_messages

#: Fields copied to the chat request as they are.
PASSED = (
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "user",
    "metadata",
    "prompt_cache_key",
    "safety_identifier",
    "service_tier",
)
#: Fields of the Responses API only: no chat equivalent, dropped.
DROPPED = frozenset(
    {
        "include",
        "truncation",
        "store",
        "stream_options",
        "context_management",
        "conversation",
        "prompt_cache_retention",
        "max_tool_calls",
        "previous_response_id",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "text",
        "reasoning",
        "stream",
        "model",
        "background",
        "prompt",
        "top_logprobs",
    }
)
#: Fields refused: Engram cannot honour them.
REFUSED = {
    "background": "background responses are not supported: Engram answers while you wait",
    "prompt": "stored prompt templates live at the provider: send the instructions instead",
}


@dataclass(frozen=True, slots=True)
class ResponsesCall:
    """A checked Responses request.

    Attributes:
        body: The body as sent (echoed in the response object).
        chat: The chat-completions request the turn runs.
        store: False: nothing of this call is stored.
        previous_response_id: The response it continues, or None.
    """

    body: Mapping[str, Any]
    chat: ChatRequest
    store: bool
    previous_response_id: str | None


def parse_responses(body: object) -> ResponsesCall:
    """Check a Responses body and turn it into the chat request of its turn.

    Raises:
        InvalidRequest: a field Engram cannot read or honour, named.
        InvalidMessage: a message it cannot store.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object", "body")
    for key, why in REFUSED.items():
        if body.get(key) not in (None, False):
            raise InvalidRequest(f"'{key}': {why}", key)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest("'model' must name the upstream model", "model")
    messages = _input(body.get("input"))
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest("'instructions' must be text", "instructions")
    if instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    chat_body: JSON = {"model": model, "messages": messages}
    chat_body.update((key, body[key]) for key in PASSED if body.get(key) is not None)
    chat_body.update(
        (key, value) for key, value in body.items() if key not in DROPPED | set(PASSED)
    )
    tools = _tools(body.get("tools"))
    if tools:
        chat_body["tools"] = tools
    if body.get("tool_choice") is not None:
        chat_body["tool_choice"] = _tool_choice(body["tool_choice"])
    reserve = body.get("max_output_tokens")
    if reserve is not None:
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 1:
            raise InvalidRequest(
                f"'max_output_tokens' must be a positive integer, got {reserve!r}",
                "max_output_tokens",
            )
        chat_body["max_completion_tokens"] = reserve
    chat_body.update(_text(body.get("text")))
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping) and isinstance(reasoning.get("effort"), str):
        chat_body["reasoning_effort"] = reasoning["effort"]
    stream = body.get("stream") is True
    if stream:
        chat_body["stream"] = True
        chat_body["stream_options"] = {"include_usage": True}  # the completed event has usage
    chat = parse_request(chat_body)
    if reserve is not None:
        chat = dataclasses.replace(chat, reserve_field="max_output_tokens")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise InvalidRequest("'previous_response_id' must be a response id", "previous_response_id")
    store = body.get("store")
    if store is not None and not isinstance(store, bool):
        raise InvalidRequest("'store' must be true or false", "store")
    return ResponsesCall(
        body=body, chat=chat, store=store is not False, previous_response_id=previous or None
    )


def _input(value: object) -> list[JSON]:
    if isinstance(value, str):
        if not value:
            raise InvalidRequest("'input' is empty", "input")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InvalidRequest("'input' must be text or a non-empty list of items", "input")
    messages = chat_messages(value)
    if not messages:
        raise InvalidRequest("'input' holds no message, call or call output", "input")
    return messages


def _tools(value: object) -> list[JSON]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidRequest("'tools' must be a list", "tools")
    out = []
    for index, tool in enumerate(value):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind != "function":
            raise InvalidRequest(
                f"tools[{index}] is a {kind!r} tool: Engram speaks to its upstream in chat "
                "completions, which takes function tools only",
                f"tools[{index}].type",
            )
        assert isinstance(tool, Mapping)
        function = {
            key: tool[key]
            for key in ("name", "description", "parameters", "strict")
            if tool.get(key) is not None
        }
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(value: object) -> object:
    if value in ("auto", "none", "required"):
        return value
    if isinstance(value, Mapping) and value.get("type") == "function" and value.get("name"):
        return {"type": "function", "function": {"name": value["name"]}}
    raise InvalidRequest(
        "'tool_choice' must be auto, none, required or a function by name "
        f"({{'type': 'function', 'name': ...}}), got {value!r:.80}",
        "tool_choice",
    )


def _text(value: object) -> JSON:
    """``text.format`` as chat's ``response_format``, ``text.verbosity`` as ``verbosity``."""
    if not isinstance(value, Mapping):
        return {}
    out: JSON = {}
    if isinstance(value.get("verbosity"), str):
        out["verbosity"] = value["verbosity"]
    shape = value.get("format")
    if not isinstance(shape, Mapping) or shape.get("type") in (None, "text"):
        return out
    if shape.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    elif shape.get("type") == "json_schema":
        schema = {
            key: shape[key] for key in ("name", "schema", "strict", "description") if key in shape
        }
        out["response_format"] = {"type": "json_schema", "json_schema": schema}
    else:
        raise InvalidRequest(
            f"text.format of type {shape.get('type')!r:.40} is not supported", "text.format"
        )
    return out
