"""Tools the model calls to recall history, as typed functions with derived schemas.

::

    from engram import tools

    response = client.chat.completions.create(
        model=..., messages=ctx.messages, tools=tools.schemas("openai")
    )
    for call in response.choices[0].message.tool_calls or []:
        answer = tools.dispatch(chat, call.function.name, call.function.arguments)
        chat.add("tool", answer, tool_call_id=call.id)

``schemas(flavor)`` gives the same tools for OpenAI chat completions
("openai"), the OpenAI Responses API ("responses"), Anthropic ("anthropic")
and MCP ("mcp"). Further tools join with :func:`register`.
"""

from engram.tools import definitions as _definitions  # registers the retrieval tools
from engram.tools import memories as _memories  # registers search_memories
from engram.tools.dispatcher import ERROR_TYPES, ToolError, decode_arguments, dispatch, validate
from engram.tools.loop import HISTORY_TOOLS_PROMPT, TurnResult, run_turn
from engram.tools.registry import (
    TOOLS,
    Tool,
    ToolSession,
    register,
    schemas,
    select,
    unregister,
)
from engram.tools.results import DEFAULT_MAX_RESULT_TOKENS, cap_result
from engram.tools.schema import FLAVORS, Length, Range

del _definitions, _memories

__all__ = [
    "DEFAULT_MAX_RESULT_TOKENS",
    "ERROR_TYPES",
    "FLAVORS",
    "HISTORY_TOOLS_PROMPT",
    "TOOLS",
    "Length",
    "Range",
    "Tool",
    "ToolError",
    "ToolSession",
    "TurnResult",
    "cap_result",
    "decode_arguments",
    "dispatch",
    "register",
    "run_turn",
    "schemas",
    "select",
    "unregister",
    "validate",
]
