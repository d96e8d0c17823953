"""Where the proxy sends completions, and how long and how many rounds it may take."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from engram.chat.loop import DEFAULT_MAX_ROUNDS, MAX_ROUNDS
from engram.errors import ConfigError
from engram.llm.client import DEFAULT_TIMEOUT, ENV_API_KEY, ENV_BASE_URL, ENV_TIMEOUT

#: Variable naming the most model calls one proxied request may make.
ENV_MAX_ROUNDS = "ENGRAM_PROXY_MAX_ROUNDS"


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
    """

    base_url: str
    api_key: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_rounds: int = DEFAULT_MAX_ROUNDS

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"upstream URL must start with http:// or https://: {self.base_url!r}"
            )
        if not 1 <= self.max_rounds <= MAX_ROUNDS:
            raise ConfigError(
                f"max_rounds must be between 1 and {MAX_ROUNDS}, got {self.max_rounds}"
            )
        if self.timeout <= 0:
            raise ConfigError(f"upstream timeout must be positive, got {self.timeout}")

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, base_url: str | None = None
    ) -> ProxySettings | None:
        """Settings from the environment; None when no upstream is named.

        Reads ``ENGRAM_LLM_BASE_URL`` / ``_API_KEY`` / ``_TIMEOUT`` and
        ``ENGRAM_PROXY_MAX_ROUNDS``; ``base_url`` wins over the variable.

        Raises:
            ConfigError: a variable is not usable.
        """
        env = os.environ if environ is None else environ
        url = base_url or env.get(ENV_BASE_URL)
        if not url:
            return None
        try:
            timeout = float(env.get(ENV_TIMEOUT) or DEFAULT_TIMEOUT)
            rounds = int(env.get(ENV_MAX_ROUNDS) or DEFAULT_MAX_ROUNDS)
        except ValueError as exc:
            raise ConfigError(f"{ENV_TIMEOUT} or {ENV_MAX_ROUNDS} is not a number: {exc}") from None
        return cls(url.rstrip("/"), env.get(ENV_API_KEY) or None, timeout, rounds)
