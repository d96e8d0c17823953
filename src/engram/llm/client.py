"""One small client for any OpenAI-compatible chat-completions endpoint.

OpenAI, xAI Grok, Ollama, vLLM, LM Studio and OpenRouter all speak the same
``POST /v1/chat/completions``; the official ``openai`` SDK talks to each of
them given a base URL, a key and a model name.

Failure policy (a failing model never fails the turn): the SDK's own retries are switched off
(``max_retries=0``) and this client retries exactly once, after a short
backoff, on a timeout, a connection error, HTTP 429 or HTTP 5xx. The timeout
bounds each attempt in total, not each read (:mod:`engram.llm.deadline`): a
server that trickles its answer is abandoned at the deadline all the same. Anything
else fails at once. Errors are mapped to :mod:`engram.errors`:
:class:`LLMTimeout`, :class:`LLMError` and :class:`LLMBadResponse`.

Usage (tokens and cost) is returned with every answer; the caller records it
with ``Store.record_usage`` so it is attributed to the right scope and session.

Async code uses :meth:`LLMClient.achat` (the SDK's ``AsyncOpenAI``, same
retry and error rules) and :meth:`LLMClient.astream`, which yields the answer's
text as it arrives and then the whole :class:`LLMResult`. Building the request,
classifying failures and reading the answer are shared by all three.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from engram import telemetry
from engram.errors import ConfigError, LLMBadResponse, LLMError, LLMTimeout
from engram.intake.checks import clean_text
from engram.llm.deadline import async_deadline, bounded_http_client, step, steps, sync_deadline
from engram.llm.prices import cost_usd
from engram.llm.replies import (
    Reply,
    StreamedAnswer,
    cached_tokens_of,
    clean_call,
    parse_json_object,
)
from engram.models import JSON, UsageRecord
from engram.tokens import count_messages, counter_for_model

if TYPE_CHECKING:
    import asyncio

    # Annotations only: the SDK is imported when a client is built (``import engram`` stays fast).
    import openai

log = logging.getLogger(__name__)

#: Seconds before an attempt is abandoned: connect to last byte, however slowly it trickles.
DEFAULT_TIMEOUT = 30.0
#: Seconds to wait before the single retry.
DEFAULT_BACKOFF = 0.5
#: Model used when only a base URL or key is configured.
DEFAULT_MODEL = "gpt-4o-mini"
#: Attempts per call: the first one and exactly one retry.
MAX_ATTEMPTS = 2

ENV_BASE_URL = "ENGRAM_LLM_BASE_URL"
ENV_API_KEY = "ENGRAM_LLM_API_KEY"
ENV_MODEL = "ENGRAM_LLM_MODEL"
ENV_TIMEOUT = "ENGRAM_LLM_TIMEOUT"

# Local servers (Ollama, vLLM, the test fake) accept any key; the SDK insists on one.
_PLACEHOLDER_KEY = "not-needed"
#: The SDK's own variables, read when Engram's (``ENGRAM_LLM_*``) are not set.
OPENAI_API_KEY = "OPENAI_API_KEY"
OPENAI_BASE_URL = "OPENAI_BASE_URL"
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


@dataclass(frozen=True, slots=True)
class LLMResult:
    """One answer and what it cost.

    ``usage_estimated`` is True when the server reported no usage and the
    token counts were computed locally instead.
    """

    text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    model: str
    purpose: str = ""
    finish_reason: str | None = None
    tool_calls: list[JSON] = field(default_factory=list)
    usage_estimated: bool = False
    cached_tokens: int | None = None

    def usage(self) -> JSON | None:
        """The provider's usage of this call in OpenAI's shape (None when it reported none).

        ``prompt_tokens_details.cached_tokens`` is what its prompt cache served.
        """
        if self.usage_estimated:
            return None
        out: JSON = {"prompt_tokens": self.input_tokens, "completion_tokens": self.output_tokens}
        if self.cached_tokens is not None:
            out["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return out

    def usage_record(self, created_at: datetime | None = None) -> UsageRecord:
        """Return the call as a :class:`UsageRecord`, ready for ``Store.record_usage``."""
        return UsageRecord(
            model=self.model,
            purpose=self.purpose,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=self.cost_usd,
            created_at=created_at or datetime.now(UTC),
        )


class LLMClient:
    """Chat completions against one model of one OpenAI-compatible server."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        backoff: float = DEFAULT_BACKOFF,
        temperature: float | None = 0.0,
    ):
        """Configure the client; nothing is sent until :meth:`chat`.

        Args:
            model: Model name as the server knows it.
            base_url: Server URL ending in ``/v1``; None means ``ENGRAM_LLM_BASE_URL``,
                else ``OPENAI_BASE_URL``, else OpenAI.
            api_key: Bearer key; None means ``ENGRAM_LLM_API_KEY``, else
                ``OPENAI_API_KEY``. A server on this machine (localhost,
                127.0.0.1, ::1) needs none.
            timeout: Seconds per attempt, in total: a server that trickles its
                answer is abandoned then, not only one that falls silent.
            backoff: Seconds to wait before the single retry.
            temperature: Sampling temperature; 0 keeps summaries stable. None omits it.

        """
        if not model:
            raise ConfigError("LLM model name is empty")
        if timeout <= 0:
            raise ConfigError(f"LLM timeout must be positive, got {timeout}")
        if backoff < 0:
            raise ConfigError(f"LLM backoff must not be negative, got {backoff}")
        self.model = model
        self.base_url = base_url or _environ(ENV_BASE_URL, OPENAI_BASE_URL)
        self.timeout = timeout
        self.backoff = backoff
        self.temperature = temperature
        key = api_key or _environ(ENV_API_KEY, OPENAI_API_KEY)
        if key is None:
            if not _is_local(self.base_url):
                raise ConfigError(
                    f"no API key for {self.base_url or 'OpenAI'}: set {ENV_API_KEY} "
                    f"(or the SDK's {OPENAI_API_KEY}), or pass api_key="
                )
            key = _PLACEHOLDER_KEY
        import openai  # here, not at import time: most programs never build a client

        self._api_key = key
        self._client = openai.OpenAI(
            api_key=key,
            base_url=self.base_url,
            timeout=timeout,
            max_retries=0,
            http_client=bounded_http_client(timeout=timeout),
        )
        # The async SDK client is bound to the event loop that first uses it.
        self._async: tuple[asyncio.AbstractEventLoop, openai.AsyncOpenAI] | None = None

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> LLMClient | None:
        """Build a client from ``ENGRAM_LLM_BASE_URL`` / ``_API_KEY`` / ``_MODEL``, or None.

        None when none of the three is set: Engram then runs with no model.
        ``ENGRAM_LLM_TIMEOUT`` (seconds) is read too. ``overrides`` are passed
        to the constructor and win over the environment.
        """
        env = os.environ if environ is None else environ
        base_url = env.get(ENV_BASE_URL) or None
        api_key = env.get(ENV_API_KEY) or None
        model = env.get(ENV_MODEL) or None
        if base_url is None and api_key is None and model is None:
            return None
        kwargs: dict[str, Any] = {
            "model": model or DEFAULT_MODEL,
            "base_url": base_url,
            "api_key": api_key,
        }
        if env.get(ENV_TIMEOUT):
            try:
                kwargs["timeout"] = float(env[ENV_TIMEOUT])
            except ValueError as exc:
                raise ConfigError(f"{ENV_TIMEOUT} is not a number: {env[ENV_TIMEOUT]!r}") from exc
        kwargs.update(overrides)
        return cls(**kwargs)

    @property
    def name(self) -> str:
        """How summaries written by this client are labelled: ``llm:<model>``."""
        return f"llm:{self.model}"

    def close(self) -> None:
        """Close the HTTP connection pool (an async pool is dropped: see :meth:`aclose`)."""
        self._client.close()
        self._async = None

    async def aclose(self) -> None:
        """Close the HTTP connection pools, the async one included."""
        if self._async is not None:
            client = self._async[1]
            self._async = None
            await client.close()
        self._client.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"LLMClient(model={self.model!r}, base_url={self.base_url!r})"

    # -- calls --------------------------------------------------------------------

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        json_mode: bool = False,
        max_tokens: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> LLMResult:
        """Send ``messages`` and return the answer with its usage.

        Args:
            messages: OpenAI-format chat messages.
            purpose: Why Engram calls the model ("summary", "important_data",
                "memories"...); recorded with the usage.
            json_mode: Ask for a JSON object (``response_format``).
            max_tokens: Cap on the answer's tokens.
            tools: Tool schemas in chat-completions format.

        Raises:
            LLMTimeout: Both attempts timed out.
            LLMError: The server failed twice, refused the request, or is unreachable.
            LLMBadResponse: The answer is not a chat completion.

        """
        kwargs = self._request(messages, json_mode=json_mode, max_tokens=max_tokens, tools=tools)
        with telemetry.chat_span(self.model, self.base_url, kwargs, purpose) as traced:
            response = self._create_with_retry(kwargs, purpose)
            result = self._result(response, messages, purpose)
            telemetry.chat_result(traced, result, messages, response)
        return result

    async def achat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        json_mode: bool = False,
        max_tokens: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> LLMResult:
        """:meth:`chat` for async code: same arguments, result, retry and errors."""
        kwargs = self._request(messages, json_mode=json_mode, max_tokens=max_tokens, tools=tools)
        with telemetry.chat_span(self.model, self.base_url, kwargs, purpose) as traced:
            response = await self._acreate_with_retry(kwargs, purpose)
            result = self._result(response, messages, purpose)
            telemetry.chat_result(traced, result, messages, response)
        return result

    async def _acreate_with_retry(self, kwargs: dict[str, Any], purpose: str) -> Any:
        client = self._async_client()
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                deadline = async_deadline(self.timeout)
                return await step(deadline, client.chat.completions.create(**kwargs))
            except Exception as exc:
                error = self._failure(exc, purpose)
                if error is None:
                    raise
                if attempt < MAX_ATTEMPTS and _retryable(exc):
                    log.warning("LLM call failed, retrying once: %s", error)
                    await _pause(self.backoff)
                    continue
                raise error from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def astream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        json_mode: bool = False,
        max_tokens: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> AsyncIterator[str | LLMResult]:
        """Stream one answer: its text pieces (``str``) as they arrive, then the whole result.

        The last item is the :class:`LLMResult` (text, tool calls, usage), as
        :meth:`achat` would return it. A failure before the first piece is
        retried once like :meth:`achat`; after it, the error is raised (text
        already yielded cannot be taken back).

        Raises:
            LLMTimeout, LLMError, LLMBadResponse: As :meth:`chat`.

        """
        kwargs = self._request(messages, json_mode=json_mode, max_tokens=max_tokens, tools=tools)
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
        with telemetry.chat_span(
            self.model, self.base_url, kwargs, purpose, detached=True
        ) as traced:
            async for item in self._astream(kwargs, messages, purpose):
                if not isinstance(item, str):
                    telemetry.chat_result(traced, item, messages)
                yield item

    async def _astream(
        self, kwargs: dict[str, Any], messages: Sequence[Mapping[str, Any]], purpose: str
    ) -> AsyncIterator[str | LLMResult]:
        client = self._async_client()
        answer = StreamedAnswer(model=self.model)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            stream: Any = None
            try:
                deadline = async_deadline(self.timeout)
                stream = await step(deadline, client.chat.completions.create(**kwargs))
                async for chunk in steps(deadline, stream.__aiter__()):
                    piece = answer.take(chunk)
                    if piece:
                        yield piece
            except Exception as exc:
                error = self._failure(exc, purpose)
                if error is None:
                    raise
                if attempt < MAX_ATTEMPTS and _retryable(exc) and not answer.started:
                    log.warning("LLM call failed, retrying once: %s", error)
                    await _pause(self.backoff)
                    continue
                raise error from exc
            finally:
                if stream is not None:
                    await stream.close()  # a stream cut at its deadline leaves no connection
            if not answer.choices:
                raise LLMBadResponse(f"{self.model} sent no choices in its stream")
            yield self._assemble(answer.reply(), messages, purpose)
            return

    def _async_client(self) -> openai.AsyncOpenAI:
        import asyncio  # only async callers pay for it

        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            import openai

            # Each call runs under its deadline (see engram.llm.deadline).
            client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
            )
            self._async = (loop, client)
        return self._async[1]

    def _request(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The SDK arguments of one chat-completions call."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if tools:
            kwargs["tools"] = list(tools)
        return kwargs

    def chat_json(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        max_tokens: int | None = None,
    ) -> tuple[JSON, LLMResult]:
        """Ask for a JSON object and return it parsed, with the call's usage.

        Raises:
            LLMBadResponse: The answer is not a JSON object, or was cut off
                (``finish_reason == "length"``). The exception's ``result``
                attribute carries the call's usage, which was spent anyway.
            LLMTimeout, LLMError: As :meth:`chat`.

        """
        result = self.chat(messages, purpose=purpose, json_mode=True, max_tokens=max_tokens)
        try:
            data = parse_json_object(result.text)
        except LLMBadResponse as exc:
            if result.finish_reason == "length":
                exc = LLMBadResponse(f"{self.model} answer was truncated (max tokens): {exc}")
            exc.result = result  # type: ignore[attr-defined]
            raise exc from None
        return data, result

    # -- internals ----------------------------------------------------------------

    def _create_with_retry(self, kwargs: dict[str, Any], purpose: str) -> Any:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with sync_deadline(self.timeout):
                    return self._client.chat.completions.create(**kwargs)
            except Exception as exc:
                error = self._failure(exc, purpose)
                if error is None:
                    raise
                if attempt < MAX_ATTEMPTS and _retryable(exc):
                    log.warning("LLM call failed, retrying once: %s", error)
                    time.sleep(self.backoff)
                    continue
                raise error from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _failure(self, exc: Exception, purpose: str) -> LLMError | None:
        """The Engram error a failed SDK call becomes, or None for an error that is not one."""
        import openai  # already loaded by __init__; a dictionary look-up

        if isinstance(exc, openai.APITimeoutError | TimeoutError):
            return LLMTimeout(f"{self.model} did not answer within {self.timeout:g}s ({purpose})")
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(f"cannot reach {self.base_url or 'OpenAI'} ({purpose}): {exc}")
        if isinstance(exc, openai.APIStatusError):
            return LLMError(
                f"{self.model} answered HTTP {exc.status_code} ({purpose}): {_short(exc)}"
            )
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return LLMBadResponse(f"{self.model} sent an unusable answer: {exc}")
        if isinstance(exc, ValueError | TypeError):
            # The SDK raises these on a 200 whose body is not a completion.
            return LLMBadResponse(f"{self.model} sent an unusable answer: {exc}")
        return None

    def _result(
        self, response: Any, messages: Sequence[Mapping[str, Any]], purpose: str
    ) -> LLMResult:
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise LLMBadResponse(f"{self.model} sent no choices: {str(response)[:200]!r}")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise LLMBadResponse(f"{self.model} sent a choice without a message")
        usage = getattr(response, "usage", None)
        reply = Reply(
            text=message.content or "",
            tool_calls=[call.model_dump(exclude_none=True) for call in (message.tool_calls or [])],
            finish_reason=choices[0].finish_reason,
            model=getattr(response, "model", None) or self.model,
            prompt_tokens=None if usage is None else usage.prompt_tokens,
            completion_tokens=None if usage is None else usage.completion_tokens,
            cached_tokens=None if usage is None else cached_tokens_of(usage),
        )
        return self._assemble(reply, messages, purpose)

    def _assemble(
        self, reply: Reply, messages: Sequence[Mapping[str, Any]], purpose: str
    ) -> LLMResult:
        """The :class:`LLMResult` of one answer, its usage counted locally when not reported."""
        text = reply.text
        if not isinstance(text, str):
            raise LLMBadResponse(f"{self.model} sent non-text content: {type(text).__name__}")
        # Model output is untrusted input: storable text only, bounded like a message.
        text = clean_text(text)
        tool_calls = [clean_call(dict(call)) for call in reply.tool_calls]
        if reply.prompt_tokens is None:
            estimated = True
            counter = counter_for_model(self.model)
            input_tokens = count_messages(counter, messages)
            shown = text + json.dumps(tool_calls) if tool_calls else text
            output_tokens = counter.count_text(shown)
        else:
            estimated = False
            input_tokens = int(reply.prompt_tokens or 0)
            output_tokens = int(reply.completion_tokens or 0)
        model = str(reply.model)
        return LLMResult(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd(model, input_tokens, output_tokens),
            model=model,
            purpose=purpose,
            finish_reason=reply.finish_reason,
            tool_calls=tool_calls,
            usage_estimated=estimated,
            cached_tokens=None if estimated else reply.cached_tokens,
        )


def _environ(*names: str) -> str | None:
    """The first of these environment variables that is set and not empty, else None."""
    return next((os.environ[name] for name in names if os.environ.get(name)), None)


def _is_local(base_url: str | None) -> bool:
    """Whether ``base_url`` names a server on this machine (which needs no key)."""
    if not base_url:
        return False
    host = urlsplit(base_url).hostname or ""
    return host in _LOCAL_HOSTS


async def _pause(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def _retryable(exc: Exception) -> bool:
    """Whether a failed call is worth its one retry: timeouts, lost connections, 429, 5xx."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | TimeoutError)


def _short(exc: openai.APIStatusError) -> str:
    return str(exc.message)[:200]


def bounded_client(llm: LLMClient, timeout: float) -> LLMClient:
    """A view of ``llm`` whose attempts together (retry included) stay within ``timeout``.

    It shares ``llm``'s connection pool, so it needs no closing of its own.
    """
    per_attempt = min(llm.timeout, timeout / MAX_ATTEMPTS)
    if per_attempt >= llm.timeout:
        return llm
    view = copy.copy(llm)
    view.timeout = per_attempt
    view._client = llm._client.with_options(timeout=per_attempt)
    return view
