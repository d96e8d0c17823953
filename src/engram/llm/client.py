"""One small client for any OpenAI-compatible chat-completions endpoint.

OpenAI, xAI Grok, Ollama, vLLM, LM Studio and OpenRouter all speak the same
``POST /v1/chat/completions``; the official ``openai`` SDK talks to each of
them given a base URL, a key and a model name.

Failure policy (DESIGN invariant 6): the SDK's own retries are switched off
(``max_retries=0``) and this client retries exactly once, after a short
backoff, on a timeout, a connection error, HTTP 429 or HTTP 5xx. Anything
else fails at once. Errors are mapped to :mod:`engram.errors`:
:class:`LLMTimeout`, :class:`LLMError` and :class:`LLMBadResponse`.

Usage (tokens and cost) is returned with every answer; the caller records it
with ``Store.record_usage`` so it is attributed to the right scope and session.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from engram.errors import ConfigError, LLMBadResponse, LLMError, LLMTimeout
from engram.llm.prices import cost_usd
from engram.models import JSON, UsageRecord
from engram.tokens import count_messages, counter_for_model

if TYPE_CHECKING:
    # Annotations only: the SDK is imported when a client is built (``import engram`` stays fast).
    import openai

log = logging.getLogger(__name__)

#: Seconds before a call is abandoned (each attempt).
DEFAULT_TIMEOUT = 30.0
#: Seconds to wait before the single retry.
DEFAULT_BACKOFF = 0.5
#: Model used when only a base URL or key is configured (seed 001's model).
DEFAULT_MODEL = "gpt-4o-mini"
#: Attempts per call: the first one and exactly one retry.
MAX_ATTEMPTS = 2

ENV_BASE_URL = "ENGRAM_LLM_BASE_URL"
ENV_API_KEY = "ENGRAM_LLM_API_KEY"
ENV_MODEL = "ENGRAM_LLM_MODEL"
ENV_TIMEOUT = "ENGRAM_LLM_TIMEOUT"

# Local servers (Ollama, vLLM, the test fake) accept any key; the SDK insists on one.
_PLACEHOLDER_KEY = "not-needed"
#: The SDK's own variables, honoured when Engram's are not given.
OPENAI_API_KEY = "OPENAI_API_KEY"
OPENAI_BASE_URL = "OPENAI_BASE_URL"
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


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
            base_url: Server URL ending in ``/v1``; None means ``OPENAI_BASE_URL``,
                else OpenAI.
            api_key: Bearer key; None means ``OPENAI_API_KEY``. A server on
                this machine (localhost, 127.0.0.1, ::1) needs none.
            timeout: Seconds per attempt.
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
        self.base_url = base_url or os.environ.get(OPENAI_BASE_URL) or None
        self.timeout = timeout
        self.backoff = backoff
        self.temperature = temperature
        key = api_key or os.environ.get(OPENAI_API_KEY) or None
        if key is None:
            if not _is_local(self.base_url):
                raise ConfigError(
                    f"no API key for {self.base_url or 'OpenAI'}: set {OPENAI_API_KEY} "
                    f"(or {ENV_API_KEY}), or pass api_key="
                )
            key = _PLACEHOLDER_KEY
        import openai  # here, not at import time: most programs never build a client

        self._client = openai.OpenAI(
            api_key=key, base_url=self.base_url, timeout=timeout, max_retries=0
        )

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
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        kwargs: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if tools:
            kwargs["tools"] = list(tools)
        response = self._create_with_retry(kwargs, purpose)
        return self._result(response, messages, purpose)

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
        import openai  # already loaded by __init__; a dictionary look-up

        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return self._client.chat.completions.create(**kwargs)
            except openai.APITimeoutError as exc:
                error: LLMError = LLMTimeout(
                    f"{self.model} did not answer within {self.timeout:g}s ({purpose})"
                )
                cause: Exception = exc
            except openai.APIConnectionError as exc:
                error = LLMError(f"cannot reach {self.base_url or 'OpenAI'} ({purpose}): {exc}")
                cause = exc
            except openai.APIStatusError as exc:
                error = LLMError(
                    f"{self.model} answered HTTP {exc.status_code} ({purpose}): {_short(exc)}"
                )
                if not _retryable_status(exc.status_code):
                    raise error from exc
                cause = exc
            except openai.APIResponseValidationError as exc:
                raise LLMBadResponse(f"{self.model} sent an unusable answer: {exc}") from exc
            except (json.JSONDecodeError, ValueError, TypeError) as exc:
                # The SDK raises these on a 200 whose body is not a completion.
                raise LLMBadResponse(f"{self.model} sent an unusable answer: {exc}") from exc
            if attempt < MAX_ATTEMPTS:
                log.warning("LLM call failed, retrying once: %s", error)
                time.sleep(self.backoff)
                continue
            raise error from cause
        raise AssertionError("unreachable")  # pragma: no cover

    def _result(
        self, response: Any, messages: Sequence[Mapping[str, Any]], purpose: str
    ) -> LLMResult:
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise LLMBadResponse(f"{self.model} sent no choices: {str(response)[:200]!r}")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise LLMBadResponse(f"{self.model} sent a choice without a message")
        text = message.content or ""
        if not isinstance(text, str):
            raise LLMBadResponse(f"{self.model} sent non-text content: {type(text).__name__}")
        tool_calls = [call.model_dump(exclude_none=True) for call in (message.tool_calls or [])]
        model = getattr(response, "model", None) or self.model
        usage = getattr(response, "usage", None)
        if usage is None or usage.prompt_tokens is None:
            estimated = True
            counter = counter_for_model(self.model)
            input_tokens = count_messages(counter, messages)
            shown = text + json.dumps(tool_calls) if tool_calls else text
            output_tokens = counter.count_text(shown)
        else:
            estimated = False
            input_tokens = int(usage.prompt_tokens or 0)
            output_tokens = int(usage.completion_tokens or 0)
        return LLMResult(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd(str(model), input_tokens, output_tokens),
            model=str(model),
            purpose=purpose,
            finish_reason=choices[0].finish_reason,
            tool_calls=tool_calls,
            usage_estimated=estimated,
        )


def parse_json_object(text: str) -> JSON:
    """Parse a model's JSON answer, tolerating a Markdown code fence around it.

    Raises:
        LLMBadResponse: Empty, invalid or truncated JSON, or JSON that is not an object.

    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise LLMBadResponse("the model answered with empty text where JSON was expected")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise LLMBadResponse(
            f"the model answered with invalid JSON ({exc}): {body[:120]!r}"
        ) from exc
    if not isinstance(data, dict):
        raise LLMBadResponse(f"the model answered with JSON {type(data).__name__}, not an object")
    return data


def _is_local(base_url: str | None) -> bool:
    """Whether ``base_url`` names a server on this machine (which needs no key)."""
    if not base_url:
        return False
    host = urlsplit(base_url).hostname or ""
    return host in _LOCAL_HOSTS


def _retryable_status(status: int) -> bool:
    return status == 429 or status >= 500


def _short(exc: openai.APIStatusError) -> str:
    return str(exc.message)[:200]
