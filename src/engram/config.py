"""Engram's settings, each declared once: its environment variable, type, default and meaning.

Every interface (library, CLI, and later the server) reads its configuration
through :meth:`Config.from_env`, so a setting has one name, one parser and one
default everywhere. Explicit arguments win over the environment::

    config = Config.from_env()                      # ENGRAM_* variables, else defaults
    config = Config.from_env(url="sqlite:///x.db")  # one value given, the rest from env

A value that cannot be read raises :class:`~engram.errors.ConfigError` naming
the variable, never a bare ``ValueError``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engram.errors import ConfigError

#: The store used when neither the caller nor ``ENGRAM_URL`` names one.
DEFAULT_URL: Final = "sqlite:///./engram.db"
#: Long-term memories kept per scope.
DEFAULT_MEMORY_CAP: Final = 10
#: Seconds ``Engram.close`` waits for background work before giving up on it.
DEFAULT_CLOSE_TIMEOUT: Final = 30.0
#: Overall seconds a synchronous compaction may take before the turn goes on without it.
DEFAULT_COMPACTION_DEADLINE: Final = 20.0
#: Model calls one proxied request may make (Engram's tool rounds, then the answer).
DEFAULT_PROXY_MAX_ROUNDS: Final = 4
#: Most model calls one proxied request may make.
MAX_PROXY_ROUNDS: Final = 16
#: Seconds after an answer during which the same request again is a retry (see the proxy).
DEFAULT_PROXY_RETRY_WINDOW: Final = 60.0


def _text(raw: str) -> str:
    return raw


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be a positive integer")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a positive number of seconds")
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if not value >= 0 or value == float("inf"):
        raise ValueError("must be a number of seconds, 0 or more")
    return value


def _rounds(raw: str) -> int:
    value = int(raw)
    if not 1 <= value <= MAX_PROXY_ROUNDS:
        raise ValueError(f"must be between 1 and {MAX_PROXY_ROUNDS}")
    return value


def _flag(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError("must be true or false")


def _flagged(raw: str) -> str:
    """``exclude`` or ``keep``, alone or followed by the scopes it is for (``keep:lab,qa``)."""
    mode, _, scopes = raw.strip().partition(":")
    if mode.strip().lower() not in {"exclude", "keep"}:
        raise ValueError("must be exclude or keep, optionally followed by :scope,scope")
    names = [name.strip() for name in scopes.split(",") if name.strip()]
    if scopes and not names:
        raise ValueError("names no scope after the colon")
    return mode.strip().lower() + (":" + ",".join(names) if names else "")


def _zone(raw: str) -> str:
    try:
        ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError("is not a known IANA time zone") from None
    return raw


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: the environment variable that sets it and how its text is read."""

    env: str
    parse: Callable[[str], Any]
    help: str


def _setting(default: Any, env: str, parse: Callable[[str], Any], help: str) -> Any:
    """A field of :class:`Config` that carries its :class:`Setting` (its one declaration)."""
    return dataclasses.field(default=default, metadata={"setting": Setting(env, parse, help)})


@dataclass(frozen=True, slots=True)
class Config:
    """Resolved settings of one ``Engram``; each field declares its variable, parser and meaning.

    The order of the fields is the order of the documentation.
    """

    url: str = _setting(
        DEFAULT_URL,
        "ENGRAM_URL",
        _text,
        "store URL: sqlite:///path, postgresql://..., jsondir:///",
    )
    tz: str = _setting("UTC", "ENGRAM_TZ", _zone, "time zone date phrases are read in (IANA name)")
    memory_cap: int = _setting(
        DEFAULT_MEMORY_CAP, "ENGRAM_MEMORY_CAP", _positive_int, "long-term memories per scope"
    )
    run_jobs: bool = _setting(
        True, "ENGRAM_RUN_JOBS", _flag, "PostgreSQL: run shared background jobs in this process"
    )
    embeddings: bool = _setting(
        False,
        "ENGRAM_EMBEDDINGS",
        _flag,
        "embed messages in the background for semantic and hybrid search (embeddings extra)",
    )
    close_timeout: float = _setting(
        DEFAULT_CLOSE_TIMEOUT,
        "ENGRAM_CLOSE_TIMEOUT",
        _positive_float,
        "seconds close() waits for background work",
    )
    compaction_deadline: float = _setting(
        DEFAULT_COMPACTION_DEADLINE,
        "ENGRAM_COMPACTION_DEADLINE",
        _positive_float,
        "overall seconds a synchronous compaction may take before the turn goes on",
    )
    proxy_budget: int | None = _setting(
        None,
        "ENGRAM_PROXY_BUDGET",
        _positive_int,
        "proxy: tokens of prompt, tools and answer per request (default: the model's window)",
    )
    proxy_max_rounds: int = _setting(
        DEFAULT_PROXY_MAX_ROUNDS,
        "ENGRAM_PROXY_MAX_ROUNDS",
        _rounds,
        "proxy: most upstream calls per request (1-16); the last offers only the client's tools",
    )
    proxy_retry_window: float = _setting(
        DEFAULT_PROXY_RETRY_WINDOW,
        "ENGRAM_PROXY_RETRY_WINDOW",
        _non_negative_float,
        "proxy: seconds after an answer during which the same request is a retry (0: never)",
    )
    proxy_single_system: bool = _setting(
        False,
        "ENGRAM_PROXY_SINGLE_SYSTEM",
        _flag,
        "proxy: send the system prompt, memories and summary as one system message",
    )
    flagged_text: str = _setting(
        "exclude",
        "ENGRAM_FLAGGED_TEXT",
        _flagged,
        "messages that read like instructions to a model: exclude (kept out of summaries and "
        "memories; still stored and searchable) or keep; 'keep:a,b' keeps them in scopes a "
        "and b only, 'exclude:a,b' keeps them out of those scopes only",
    )

    def keeps_flagged(self, scope: str) -> bool:
        """Whether text that reads like instructions may feed ``scope``'s summaries and memories."""
        mode, _, scopes = self.flagged_text.partition(":")
        if not scopes:
            return mode == "keep"
        listed = scope in scopes.split(",")
        return listed if mode == "keep" else not listed

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> Config:
        """Settings from ``given`` (when not None), else the environment, else the defaults.

        Raises:
            ConfigError: a variable is set to a value that cannot be read, or an
                unknown setting is given.

        """
        unknown = sorted(set(given) - set(SETTINGS))
        if unknown:
            raise ConfigError(f"unknown setting(s) {unknown}; known: {list(SETTINGS)}")
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, setting in SETTINGS.items():
            if given.get(name) is not None:
                values[name] = _checked(name, setting, given[name])
                continue
            raw = env.get(setting.env)
            if raw:
                try:
                    values[name] = setting.parse(raw)
                except ValueError as exc:
                    raise ConfigError(f"{setting.env}={raw!r} {exc}") from None
        return cls(**values)

    def replace(self, **changes: Any) -> Config:
        """A copy with some settings changed (checked like the environment's)."""
        for name, value in changes.items():
            if name not in SETTINGS:
                raise ConfigError(f"unknown setting {name!r}; known: {list(SETTINGS)}")
            changes[name] = _checked(name, SETTINGS[name], value)
        return dataclasses.replace(self, **changes)


#: Field name -> its setting, read off the fields of :class:`Config`.
SETTINGS: Final[dict[str, Setting]] = {
    f.name: f.metadata["setting"] for f in dataclasses.fields(Config)
}


def _checked(name: str, setting: Setting, value: Any) -> Any:
    """A value given in code, checked by the same rule as its environment text."""
    if setting.parse is _flag or isinstance(value, bool):
        if setting.parse is _flag and isinstance(value, bool):
            return value
        raise ConfigError(f"{name}={value!r}: wrong type")
    try:
        return setting.parse(str(value))
    except ValueError as exc:
        raise ConfigError(f"{name}={value!r} {exc}") from None
