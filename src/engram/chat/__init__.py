"""The chat loop: one turn with tool calls, run for several rounds, each round stored.

::

    import engram.chat

    turn = engram.chat.run_turn(chat, client, "What did we decide?", budget=8000)

:func:`run_turn` drives the loop with a synchronous client; async code uses
:func:`arun_turn` or :func:`stream_turn` (loaded on first use, so code that
never runs async does not pay for asyncio).
"""

from engram.chat.loop import TurnResult, run_turn
from engram.tools.registry import HISTORY_TOOLS_PROMPT

#: The async chat loop, loaded on first use.
_ASYNC = ("TurnStream", "arun_turn", "stream_turn")


def __getattr__(name: str) -> object:
    if name in _ASYNC:
        from engram.chat import async_loop

        return getattr(async_loop, name)
    raise AttributeError(f"module 'engram.chat' has no attribute {name!r}")


__all__ = ["HISTORY_TOOLS_PROMPT", "TurnResult", "run_turn", *_ASYNC]
