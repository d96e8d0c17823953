"""LangChain and LangGraph, with Engram keeping the conversation (extra: ``langchain``).

::

    from engram.integrations.langchain import EngramChatMessageHistory

    history = EngramChatMessageHistory("chat-42", scope="phoenix", budget=8000)
    history.add_messages([HumanMessage("What did we decide about pricing?")])
    prompt = history.messages          # fits the budget: no trim_messages needed
    tools = history.tools()            # search_history, ... as LangChain tools

:class:`EngramChatMessageHistory` is a ``BaseChatMessageHistory`` (the
interface of ``RunnableWithMessageHistory``). Every message added is stored
in Engram; ``messages`` is the prompt Engram builds for the next turn:
long-term memories and the summary as system messages, then the newest
messages that fit the budget, tool calls never split from their results.
Messages are translated with langchain-core's own OpenAI converters, so
``AIMessage.tool_calls`` and ``ToolMessage`` keep their ids. (langchain-core
1.6.4 marks ``BaseChatMessageHistory`` deprecated for 2.0; it is still the
interface its runnables use.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engram.aio import AsyncEngram
from engram.engine import Engram, open
from engram.errors import MissingDependency
from engram.integrations.retrieval import BoundTool, bound_tools
from engram.policy import Policy

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        BaseMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.tools import BaseTool, StructuredTool
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise MissingDependency.extra("engram.integrations.langchain", "langchain", exc) from exc

__all__ = ["EngramChatMessageHistory", "engram_tools"]


class EngramChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history whose messages live in Engram; ``messages`` fits a budget."""

    def __init__(
        self,
        session_id: str,
        *,
        scope: str = "default",
        engram: Engram | AsyncEngram | None = None,
        budget: int | None = None,
        reserve: int | None = None,
        system: str | None = None,
        model: str | None = None,
        policy: Policy | str | Mapping[str, Any] | None = None,
    ) -> None:
        """Bind the history; the session is created in Engram on its first message.

        Args:
            session_id: The conversation.
            scope: The project, app or user it belongs to.
            engram: Where messages are kept (default: ``engram.open()``, closed by :meth:`close`).
            budget: Tokens of the prompt ``messages`` returns (default: the policy's).
            reserve: Tokens of the budget kept free (default: the policy's).
            system: A system prompt to put first (counted in the budget).
            model: Model whose tokenizer counts the budget (default: Engram's counter).
            policy: The session's policy (preset name, :class:`Policy` or dict).

        """
        self._owned = engram is None
        if engram is None:
            engram = open()
        self.engram = engram.sync if isinstance(engram, AsyncEngram) else engram
        self.session = self.engram.session(session_id, scope, policy=policy)
        self.budget = budget
        self.reserve = reserve
        self.system = system
        self.model = model

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The prompt of the next turn, as LangChain messages (see the module docs)."""
        ctx = self.session.context(
            self.budget, reserve=self.reserve, system=self.system, model=self.model
        )
        return convert_to_messages(ctx.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages in one transaction (all or none)."""
        converted = convert_to_openai_messages(list(messages))
        if converted:
            self.session.add_many(converted)

    def clear(self) -> None:
        """Delete every message of the session (its policy is kept)."""
        self.session.clear()

    def tools(self, names: Iterable[str] | None = None) -> list[BaseTool]:
        """Engram's retrieval tools for this conversation, as LangChain tools."""
        return engram_tools(bound_tools(self.session, names))

    def close(self) -> None:
        """Close the Engram this history opened (one given by the caller stays open)."""
        if self._owned:
            self.engram.close()
            self._owned = False


def engram_tools(tools: Iterable[BoundTool]) -> list[BaseTool]:
    """Bound Engram tools as LangChain structured tools (JSON Schema arguments)."""
    return [_structured(tool) for tool in tools]


def _structured(tool: BoundTool) -> BaseTool:
    def run(**arguments: Any) -> str:
        return tool.run(arguments)

    async def arun(**arguments: Any) -> str:
        return await tool.arun(arguments)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=tool.name,
        description=tool.description,
        args_schema=tool.parameters,
        infer_schema=False,
    )
