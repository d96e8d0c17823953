"""Provider shapes of a prompt: the Anthropic Messages form, and one merged system message.

Engram builds prompts in OpenAI's chat format (:class:`engram.context.Context`).
This module turns such a message list into the other forms providers and chat
templates want, without changing what the model is told:

* :func:`anthropic_prompt`: ``system`` apart from ``messages``; assistant tool
  calls as ``tool_use`` blocks, tool results as ``tool_result`` blocks inside a
  user turn; consecutive turns of one role merged (the API wants them
  alternating); image parts as image blocks. With ``cache=True`` it marks
  Anthropic cache breakpoints (``cache_control``) on the last stable block of the
  system part and on the last message before the current turn, so a provider's
  prompt cache can reuse everything the previous turn already sent.
* :func:`merge_system`: the leading system messages (the system prompt and
  Engram's sections) joined into one, for chat templates that refuse several.

Pure functions: no I/O, no state; the same input gives the same output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engram.intake.parts import content_text
from engram.models import JSON

__all__ = [
    "CACHE_CONTROL",
    "MAX_BREAKPOINTS",
    "anthropic_prompt",
    "merge_system",
    "put_back",
    "tool_use_block",
]

#: The marker Anthropic reads as "cache the prompt up to here".
CACHE_CONTROL: JSON = {"type": "ephemeral"}
#: Anthropic accepts at most this many cache breakpoints in one request.
MAX_BREAKPOINTS = 4
#: Separates the merged system parts.
SYSTEM_JOINER = "\n\n"
#: Stands in for a user turn when the window opens on an assistant message.
OPENING_USER_TEXT = "(earlier conversation continues)"


def merge_system(messages: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """The same prompt with its leading system messages joined into one.

    Only the leading run is merged (the system prompt and the sections); a
    system message inside the history keeps its place. The order of the text
    is unchanged.
    """
    lead = _leading_system(messages)
    if lead <= 1:
        return [dict(m) for m in messages]
    text = SYSTEM_JOINER.join(content_text(m.get("content")) for m in messages[:lead])
    return [{"role": "system", "content": text}, *(dict(m) for m in messages[lead:])]


def anthropic_prompt(
    messages: Sequence[Mapping[str, Any]],
    *,
    turn_start: int | None = None,
    cache: bool = True,
    kept: Mapping[int, Sequence[tuple[int, Mapping[str, Any]]]] | None = None,
) -> JSON:
    """The prompt in Anthropic's Messages form: ``{"system": ..., "messages": [...]}``.

    Args:
        messages: An OpenAI-format prompt (``Context.messages``).
        turn_start: Index in ``messages`` where the current turn begins (the
            newest user message); everything before it is what the previous
            turn already sent. None: no breakpoint in the messages.
        cache: Mark ``cache_control`` breakpoints: on the last system block,
            and on the last message before ``turn_start``. ``system`` is then
            a list of text blocks (one per system message), else one string.
        kept: Blocks to put back into a message, by its index in ``messages``:
            ``(place, block)`` pairs, each block set at its place among the
            message's blocks (Anthropic's ``thinking`` blocks, kept verbatim).

    Returns:
        ``{"system": str | list[block], "messages": list[message]}``; ``system``
        is absent when the prompt has none.

    """
    lead = _leading_system(messages)
    system_texts = [content_text(m.get("content")) for m in messages[:lead]]
    out: list[JSON] = []
    stable_end: int | None = None  # index in ``out`` of the last message before the turn
    for index in range(lead, len(messages)):
        if turn_start is not None and index == turn_start and out:
            stable_end = len(out) - 1
        role, blocks = _anthropic_turn(messages[index])
        blocks = put_back(blocks, (kept or {}).get(index, ()))
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [_text_block(OPENING_USER_TEXT)]})
        stable_end = None if stable_end is None else stable_end + 1
    prompt: JSON = {}
    if system_texts:
        if cache:
            blocks = [_text_block(text) for text in system_texts]
            blocks[-1]["cache_control"] = dict(CACHE_CONTROL)
            prompt["system"] = blocks
        else:
            prompt["system"] = SYSTEM_JOINER.join(system_texts)
    if cache and stable_end is not None:
        last_block = out[stable_end]["content"][-1]
        last_block["cache_control"] = dict(CACHE_CONTROL)
    prompt["messages"] = out
    return prompt


def put_back(blocks: Sequence[JSON], kept: Sequence[tuple[int, Mapping[str, Any]]]) -> list[JSON]:
    """``blocks`` with kept blocks set back at their places (past the end: at the end).

    Places are indexes in the list as it was; two kept blocks at one place keep
    their order.
    """
    out = list(blocks)
    last: tuple[int, int] | None = None  # (place asked, index used) of the previous one
    for place, block in sorted(kept, key=lambda pair: pair[0]):
        index = min(max(place, 0), len(out))
        if last is not None and last[0] == place:
            index = last[1] + 1
        out.insert(index, dict(block))
        last = (place, index)
    return out


# --------------------------------------------------------------------------- helpers


def _leading_system(messages: Sequence[Mapping[str, Any]]) -> int:
    count = 0
    for message in messages:
        if message.get("role") != "system":
            break
        count += 1
    return count


def _text_block(text: str) -> JSON:
    return {"type": "text", "text": text}


def _anthropic_turn(message: Mapping[str, Any]) -> tuple[str, list[JSON]]:
    """One OpenAI message as an Anthropic role and its content blocks."""
    role = message.get("role")
    if role == "tool":
        result: JSON = {
            "type": "tool_result",
            "tool_use_id": str(message.get("tool_call_id") or ""),
            "content": content_text(message.get("content")),
        }
        return "user", [result]
    blocks = _content_blocks(message.get("content"))
    if role == "system":
        # Anthropic has no system turn inside the conversation: keep it as user text.
        return "user", [_text_block(f"[system] {content_text(message.get('content'))}")]
    if role == "assistant":
        blocks.extend(tool_use_block(call) for call in message.get("tool_calls") or ())
        return "assistant", blocks or [_text_block("")]
    return "user", blocks or [_text_block("")]


def _content_blocks(content: Any) -> list[JSON]:
    if content is None:
        return []
    if isinstance(content, str):
        return [_text_block(content)] if content else []
    blocks: list[JSON] = []
    for part in content if isinstance(content, list) else [content]:
        if not isinstance(part, Mapping):
            blocks.append(_text_block(str(part)))
        elif part.get("type") == "text":
            blocks.append(_text_block(str(part.get("text", ""))))
        elif part.get("type") == "image_url":
            blocks.append(_image_block(part.get("image_url")))
        else:
            blocks.append(_text_block(json.dumps(part, ensure_ascii=False, sort_keys=True)))
    return blocks


def _image_block(image: Any) -> JSON:
    url = str(image.get("url", "")) if isinstance(image, Mapping) else str(image or "")
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[len("data:") :].split(";base64,", 1)
        source: JSON = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def tool_use_block(call: Mapping[str, Any]) -> JSON:
    """An OpenAI tool call as an Anthropic ``tool_use`` block (``input`` always an object)."""
    function = call.get("function") or {}
    raw = function.get("arguments") if isinstance(function, Mapping) else None
    try:
        arguments = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        # Anthropic wants an object: keep what the model sent, whole, under one key.
        arguments = {"arguments": raw}
    name = function.get("name", "") if isinstance(function, Mapping) else ""
    return {"type": "tool_use", "id": str(call.get("id", "")), "name": name, "input": arguments}
