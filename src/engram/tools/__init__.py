"""Tools the model calls to recall history, as typed functions with derived schemas.

::

    from engram import tools

    response = client.chat.completions.create(
        model=..., messages=ctx.messages, tools=tools.schemas("openai")
    )
    for call in response.choices[0].message.tool_calls or []:
        answer = tools.dispatch(chat, call.function.name, call.function.arguments)
        chat.add("tool", answer, tool_call_id=call.id)

:mod:`engram.chat` runs a whole turn with tool calls (``run_turn``, and
``arun_turn`` / ``stream_turn`` for async code).

``schemas(flavor)`` gives the same tools for OpenAI chat completions
("openai"), the OpenAI Responses API ("responses"), Anthropic ("anthropic")
and MCP ("mcp"). Further tools join with :func:`register`.
"""

from engram.tools.definitions import (
    expand,
    get_extended_context,
    get_memory_stats,
    get_message_by_id,
    get_messages_by_date,
    search_history,
)
from engram.tools.dispatcher import (
    ERROR_TYPES,
    ToolError,
    decode_arguments,
    dispatch,
    is_error,
    validate,
)
from engram.tools.memories import (
    add_memory,
    delete_memory,
    edit_memory,
    list_memories,
    search_memories,
)
from engram.tools.registry import (
    HISTORY_TOOLS_PROMPT,
    TOOLS,
    Tool,
    ToolSession,
    declared,
    describe,
    install,
    register,
    schemas,
    select,
    unregister,
)
from engram.tools.results import DEFAULT_MAX_RESULT_TOKENS, cap_result
from engram.tools.schema import FLAVORS, Length, Range

#: Engram's own tools, in the order they are offered: the retrieval tools, then memories.
BUILTIN_TOOLS = (
    search_history,
    get_messages_by_date,
    get_extended_context,
    get_message_by_id,
    get_memory_stats,
    expand,
    search_memories,
)
for _builtin in BUILTIN_TOOLS:
    install(_builtin, replace=True)
del _builtin


#: Tools that list and change a scope's memories. Declared, not installed: a chat
#: loop never offers them; an interface that does (the MCP server) passes them
#: explicitly (see ``Tool.writes`` for the ones a read-only caller must not get).
MEMORY_TOOLS = (list_memories, add_memory, edit_memory, delete_memory)

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_MAX_RESULT_TOKENS",
    "ERROR_TYPES",
    "FLAVORS",
    "HISTORY_TOOLS_PROMPT",
    "MEMORY_TOOLS",
    "TOOLS",
    "Length",
    "Range",
    "Tool",
    "ToolError",
    "ToolSession",
    "cap_result",
    "declared",
    "decode_arguments",
    "describe",
    "dispatch",
    "install",
    "is_error",
    "register",
    "schemas",
    "select",
    "unregister",
    "validate",
]
