"""Where the proxy sends completions, and its limits: time, rounds, budget, retries, system."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

from engram.config import (
    DEFAULT_PROXY_MAX_ROUNDS,
    DEFAULT_PROXY_RETRY_WINDOW,
    MAX_PROXY_ROUNDS,
    Config,
)
from engram.errors import ConfigError
from engram.llm.client import DEFAULT_TIMEOUT, ENV_API_KEY, ENV_BASE_URL, ENV_TIMEOUT

#: Set to 1: the upstream also speaks the Responses API (``engram serve --upstream-responses``).
ENV_RESPONSES_API = "ENGRAM_PROXY_UPSTREAM_RESPONSES"
#: The Anthropic-format upstream of ``/v1/messages``, and its server-side key.
ENV_ANTHROPIC_BASE_URL = "ENGRAM_ANTHROPIC_BASE_URL"
ENV_ANTHROPIC_API_KEY = "ENGRAM_ANTHROPIC_API_KEY"


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """The upstream model endpoint and the proxy's limits.

    Attributes:
        base_url: Any OpenAI-compatible base URL (OpenAI, xAI, Ollama, vLLM...),
            up to and including ``/v1``.
        api_key: The upstream's key (None: send none, for local servers).
        timeout: Seconds one upstream call may take; past it the client gets 504.
        max_rounds: Most upstream calls per request: Engram's own tool rounds
            plus the answer; the last round offers Engram's tools no more.
        budget: Tokens of prompt, tool schemas and answer per request; None:
            the model's context window (a request's ``X-Engram-Budget`` wins).
        retry_window: Seconds after an answer during which a request that
            repeats its turn gets that answer back instead of a new one (0: never;
            a request with the turn's Idempotency-Key always does).
        single_system: Send the system prompt, memories and summary as one
            system message (a request's ``X-Engram-Single-System`` asks too).
        responses_api: The upstream also speaks the Responses API: ``/v1/responses``
            requests go to its ``/responses`` in that format (so reasoning items go
            back as they came); otherwise they are sent as chat completions.
    """

    base_url: str
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_rounds: int = DEFAULT_PROXY_MAX_ROUNDS
    budget: int | None = None
    retry_window: float = DEFAULT_PROXY_RETRY_WINDOW
    single_system: bool = False
    responses_api: bool = False

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"upstream URL must start with http:// or https://: {self.base_url!r}"
            )
        if not 1 <= self.max_rounds <= MAX_PROXY_ROUNDS:
            raise ConfigError(
                f"max_rounds must be between 1 and {MAX_PROXY_ROUNDS}, got {self.max_rounds}"
            )
        if self.timeout <= 0:
            raise ConfigError(f"upstream timeout must be positive, got {self.timeout}")
        if self.budget is not None and (isinstance(self.budget, bool) or self.budget < 1):
            raise ConfigError(f"the proxy budget must be a positive integer, got {self.budget}")
        if not self.retry_window >= 0:
            raise ConfigError(f"retry_window must be 0 or more seconds, got {self.retry_window}")

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        base_url: str | None = None,
        budget: int | None = None,
        single_system: bool = False,
        responses_api: bool = False,
    ) -> ProxySettings | None:
        """Settings from the environment; None when no upstream is named.

        Reads ``ENGRAM_LLM_BASE_URL`` / ``_API_KEY`` / ``_TIMEOUT`` and the
        ``ENGRAM_PROXY_*`` settings of :class:`~engram.config.Config`; the
        arguments (``engram serve`` options) win over the variables.

        Raises:
            ConfigError: a variable is not usable.
        """
        env = os.environ if environ is None else environ
        url = base_url or env.get(ENV_BASE_URL)
        if not url:
            return None
        config = Config.from_env(env)
        try:
            timeout = float(env.get(ENV_TIMEOUT) or DEFAULT_TIMEOUT)
        except ValueError as exc:
            raise ConfigError(f"{ENV_TIMEOUT} is not a number: {exc}") from None
        return cls(
            url.rstrip("/"),
            env.get(ENV_API_KEY) or None,
            timeout,
            config.proxy_max_rounds,
            budget if budget is not None else config.proxy_budget,
            config.proxy_retry_window,
            single_system or config.proxy_single_system,
            responses_api or env.get(ENV_RESPONSES_API, "").lower() in ("1", "true", "yes"),
        )


def anthropic_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    base_url: str | None = None,
    budget: int | None = None,
    single_system: bool = False,
) -> ProxySettings | None:
    """The settings of the Anthropic-format upstream (``/v1/messages``); None when none is named.

    The URL is ``base_url`` (``engram serve --anthropic-upstream``), else
    ``ENGRAM_ANTHROPIC_BASE_URL``; the key, used only for clients that send no
    ``x-api-key`` of their own, ``ENGRAM_ANTHROPIC_API_KEY``. Timeout, rounds,
    budget and retries are the proxy's (:meth:`ProxySettings.from_env`).

    Raises:
        ConfigError: a variable is not usable.
    """
    env = os.environ if environ is None else environ
    url = base_url or env.get(ENV_ANTHROPIC_BASE_URL)
    if not url:
        return None
    shared = ProxySettings.from_env(
        {**env, ENV_BASE_URL: url}, budget=budget, single_system=single_system
    )
    assert shared is not None
    return dataclasses.replace(shared, api_key=env.get(ENV_ANTHROPIC_API_KEY) or None)
