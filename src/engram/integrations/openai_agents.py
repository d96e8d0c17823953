"""The OpenAI Agents SDK, with Engram keeping the conversation.

Needs the ``agents`` extra: ``pip install 'engram-conversation-memory[agents]'``.

::

    from agents import Agent, Runner
    from engram.integrations.openai_agents import EngramSession

    session = EngramSession("chat-42", scope="phoenix", budget=8000)
    agent = Agent(name="Assistant", tools=session.tools())
    result = await Runner.run(agent, "What did we decide about pricing?", session=session)

:class:`EngramSession` implements the SDK's ``Session`` protocol. Every item
the run produces is stored in Engram (messages, function calls and their
outputs); ``get_items()`` returns the prompt Engram builds for the next turn
(long-term memories, summary and important data, then the newest messages
that fit the budget) instead of the whole history, and :meth:`EngramSession.tools`
gives the model Engram's retrieval tools to recall what is no longer shown.

Items are translated to chat messages and back: user, system and developer
messages (developer is stored as system), assistant messages, ``function_call``
and ``function_call_output`` items. Items of other types (reasoning, hosted
tool calls) are not kept; a warning names them. Assistant messages come back
in the SDK's short form (``{"role": "assistant", "content": text}``). A user
message with ``input_image`` parts is stored whole (``Message.parts``) and
comes back as ``input_text`` and ``input_image`` parts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from engram.aio import AsyncEngram, AsyncSession, offload
from engram.engine import Engram, open
from engram.errors import InvalidMessage, MissingDependency
from engram.intake.parts import join_texts
from engram.integrations.paging import newest
from engram.integrations.retrieval import BoundTool, bound_tools
from engram.models import JSON, Message
from engram.policy import Policy

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.memory import SessionSettings
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise MissingDependency.extra("engram.integrations.openai_agents", "agents", exc) from exc

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["EngramSession", "items_to_messages", "messages_to_items"]

logger = logging.getLogger("engram.integrations")


class EngramSession:
    """An Agents SDK session whose items live in Engram.

    ``get_items()`` gives the budgeted prompt of the next turn; with a
    ``limit`` it gives the newest ``limit`` stored items, as the protocol
    says. The SDK sends the agent's instructions and the new input on top of
    the items: choose ``budget`` (or ``reserve``) to leave room for them.
    """

    session_settings: SessionSettings | None = None
    #: Items come back without the ids the model gave them: the SDK must not match on ids.
    _ignore_ids_for_matching = True

    def __init__(
        self,
        session_id: str,
        *,
        scope: str = "default",
        engram: Engram | AsyncEngram | None = None,
        budget: int | None = None,
        reserve: int | None = None,
        model: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        """Bind the session; it is created in Engram on its first item.

        Args:
            session_id: The conversation, as the SDK names it.
            scope: The project, app or user it belongs to.
            engram: Where items are kept (default: ``engram.open()``, closed by :meth:`close`).
            budget: Tokens of the prompt ``get_items()`` returns (default: the policy's).
            reserve: Tokens of the budget kept free (default: the policy's).
            model: Model whose tokenizer counts the budget (default: Engram's counter).
            policy: The session's policy (preset name, :class:`Policy` or dict).
            session_settings: The SDK's settings (``limit``) for this session.

        """
        self._owned = engram is None
        core = (
            open() if engram is None else engram.sync if isinstance(engram, AsyncEngram) else engram
        )
        self.engram = core
        self.session_id = session_id
        self.session_settings = session_settings
        self.chat = AsyncSession(core.session(session_id, scope, policy=policy))
        self.budget = budget
        self.reserve = reserve
        self.model = model

    # -- the Session protocol ---------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The next turn's prompt (``limit`` None), or the newest ``limit`` stored items."""
        if limit is None:
            ctx = await self.chat.context(self.budget, reserve=self.reserve, model=self.model)
            return messages_to_items(ctx.messages)
        if limit <= 0:
            return []
        rows = await offload(newest, self.chat.sync, limit)
        return messages_to_items(m.to_openai() for m in rows)[-limit:]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items (one transaction: all or none)."""
        messages = items_to_messages(items)
        if messages:
            await self.chat.add_many(messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Delete the newest stored message and return it as an item (None when empty).

        A stored assistant message with several function calls is one message:
        it goes whole, and its last call is returned.
        """
        gone: Message | None = await offload(self.chat.sync.pop_item)
        if gone is None:
            return None
        items = messages_to_items([gone.to_openai()])
        return items[-1] if items else None

    async def clear_session(self) -> None:
        """Delete every item of the session (its policy is kept)."""
        await offload(self.chat.sync.clear)

    # -- Engram's tools and lifecycle -------------------------------------------------

    def tools(self, names: Iterable[str] | None = None) -> list[FunctionTool]:
        """Engram's retrieval tools for this session, as SDK function tools.

        Args:
            names: Only these tools (default: every registered tool).

        """
        return [_function_tool(tool) for tool in bound_tools(self.chat.sync, names)]

    def close(self) -> None:
        """Close the Engram this session opened (one given by the caller stays open)."""
        if self._owned:
            self.engram.close()
            self._owned = False

    def __repr__(self) -> str:
        return f"EngramSession({self.session_id!r}, scope={self.chat.scope!r})"


def _function_tool(tool: BoundTool) -> FunctionTool:
    async def invoke(context: RunContextWrapper[Any], arguments: str) -> str:
        return await tool.arun(arguments)

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,  # optional arguments, as the tools declare them
    )


# -- translation ----------------------------------------------------------------------


def items_to_messages(items: Iterable[Mapping[str, Any]]) -> list[JSON]:
    """Agents SDK input items as OpenAI chat messages, ready for ``Session.add_many``.

    Consecutive function calls become one assistant message with several
    tool calls, as chat completions carries them. Unknown item types are
    left out with a warning.
    """
    messages: list[JSON] = []
    calls_open = False  # the last message gathers function calls
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item.get("arguments") or ""},
            }
            if calls_open:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                calls_open = True
            continue
        calls_open = False
        if kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output)
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
        elif kind == "message" and "role" in item:
            role = "system" if item["role"] == "developer" else item["role"]
            content = item.get("content")
            # With an image the parts go as they are: Engram keeps them (engram.intake.checks).
            kept = content if _has_image(content) else _text(content)
            messages.append({"role": role, "content": kept})
        else:
            logger.warning("an Agents SDK item of type %r is not kept by Engram", kind)
    return messages


def messages_to_items(messages: Iterable[Mapping[str, Any]]) -> list[TResponseInputItem]:
    """OpenAI chat messages (a prompt or stored messages) as Agents SDK input items."""
    items: list[Any] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            output = message.get("content") or ""
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": output,
                }
            )
            continue
        content = message.get("content")
        if isinstance(content, list):  # a message with images: Responses input parts
            items.append({"role": role, "content": [_input_part(part) for part in content]})
        elif content:
            items.append({"role": role, "content": content})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function.get("name", ""),
                    "arguments": function.get("arguments") or "",
                }
            )
    return items


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, Mapping) and part.get("type") in ("input_image", "image_url")
        for part in content
    )


def _input_part(part: Mapping[str, Any]) -> JSON:
    """A chat content part (text or ``image_url``) as a Responses input part."""
    if part.get("type") == "image_url":
        image = part.get("image_url") or {}
        return {
            "type": "input_image",
            "image_url": image.get("url"),
            "detail": image.get("detail") or "auto",
        }
    return {"type": "input_text", "text": part.get("text", "")}


def _text(content: Any) -> str:
    """The text of an item's content: a string, or its text parts joined.

    Raises:
        InvalidMessage: a part that is not text (Engram stores text).

    """
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in content if isinstance(content, list) else [content]:
        text = part.get("text", part.get("refusal")) if isinstance(part, Mapping) else None
        if not isinstance(text, str):
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            raise InvalidMessage(
                f"item content: a {kind!r} part; Engram stores text and image parts"
            )
        parts.append(text)
    return join_texts(parts)
