"""The chat loop for asyncio code: the same turn, with the answer streamed if wanted.

::

    turn = await engram.chat.arun_turn(chat, client, "And the price?", budget=8000)

    stream = engram.chat.stream_turn(chat, client, "And the price?", budget=8000)
    async for text in stream:
        print(text, end="", flush=True)
    print(stream.result.tool_calls)

Both drive the one turn logic of :func:`engram.chat.loop.turn_steps`: its
steps (store reads and writes, tool calls, prompt building) run in a worker
thread through :func:`engram.aio.offload`, and the model is awaited with
:meth:`LLMClient.achat` or streamed with :meth:`LLMClient.astream`. So a turn
stores, budgets and reports exactly as :func:`engram.chat.run_turn` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Unpack

from engram import telemetry
from engram.aio import AsyncSession, offload
from engram.chat.loop import PURPOSE, ModelCall, TurnOptions, TurnResult, advance, turn_steps
from engram.errors import EngramError

if TYPE_CHECKING:
    from engram.llm.client import LLMClient, LLMResult

__all__ = ["TurnStream", "arun_turn", "stream_turn"]


class TurnStream:
    """One turn whose answer text is yielded as it arrives; :attr:`result` once it ends.

    Iterate it once. Text the model sends in a round that ends with tool
    calls (models seldom send any) is yielded too; :attr:`TurnResult.answer`
    holds the final answer alone.
    """

    def __init__(
        self,
        session: AsyncSession,
        client: LLMClient,
        user_message: str,
        options: TurnOptions,
        *,
        stream: bool = True,
    ) -> None:
        self._session = session
        self._client = client
        self._user_message = user_message
        self._options = options
        self._stream = stream
        self._result: TurnResult | None = None
        self._started = False

    @property
    def result(self) -> TurnResult:
        """What the turn did (as :func:`engram.chat.run_turn` returns it).

        Raises:
            EngramError: the stream has not been read to its end yet.

        """
        if self._result is None:
            raise EngramError("the turn is not finished: read the stream to its end first")
        return self._result

    def __aiter__(self) -> AsyncIterator[str]:
        if self._started:
            raise EngramError("a turn stream can be read only once")
        self._started = True
        return self._run()

    async def _run(self) -> AsyncIterator[str]:
        steps = turn_steps(
            self._session.sync,
            self._user_message,
            default_model=self._client.model,
            **self._options,
        )
        step = await offload(advance, steps, None)
        chat = self._session.sync
        while isinstance(step, ModelCall):
            answer: LLMResult | None = None
            if self._stream:
                pieces = aiter(
                    self._client.astream(step.messages, purpose=PURPOSE, tools=step.tools)
                )
                # The call's span starts with its first piece: it names the session then.
                with telemetry.conversation(chat.scope, chat.id):
                    item = await anext(pieces)
                while True:
                    if isinstance(item, str):
                        yield item
                    else:
                        answer = item
                    try:
                        item = await anext(pieces)
                    except StopAsyncIteration:
                        break
            else:
                with telemetry.conversation(chat.scope, chat.id):
                    call = self._client.achat(step.messages, purpose=PURPOSE, tools=step.tools)
                    answer = await call
            step = await offload(advance, steps, answer)
        self._result = step


def stream_turn(
    session: AsyncSession, client: LLMClient, user_message: str, **options: Unpack[TurnOptions]
) -> TurnStream:
    """:func:`engram.chat.run_turn` for async code, its answer streamed as it is written.

    Args:
        session: The conversation (from :meth:`engram.aio.AsyncEngram.session`).
        client: The model to talk to.
        user_message: The user's text.
        **options: See :class:`engram.chat.loop.TurnOptions`; ``budget`` is required.

    Returns:
        An async iterator of text pieces; its ``result`` is the
        :class:`TurnResult` once the iteration ends. Errors are those of
        :func:`engram.chat.run_turn`, raised while iterating.

    """
    return TurnStream(session, client, user_message, options)


async def arun_turn(
    session: AsyncSession, client: LLMClient, user_message: str, **options: Unpack[TurnOptions]
) -> TurnResult:
    """:func:`engram.chat.run_turn` for async code: same options, result and errors."""
    turn = TurnStream(session, client, user_message, options, stream=False)
    async for _ in turn:
        pass  # nothing is yielded without streaming
    return turn.result
