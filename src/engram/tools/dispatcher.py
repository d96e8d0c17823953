"""Run one tool call from a model: parse, validate, call, cap, answer in JSON.

Whatever the model sends, :func:`dispatch` returns text the model can read
and never raises for bad input. Failures are ``{"error": {"type": ...,
"message": ...}}`` with one of :data:`ERROR_TYPES`; an unexpected exception is
logged with its traceback and reported to the model as ``internal`` without it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engram.errors import ConfigError, DateParseError, EngramError, InvalidQuery, NotFound
from engram.intake.checks import is_clean
from engram.models import JSON
from engram.tokens import TokenCounter
from engram.tools.registry import RECORDS_NOTE, TOOLS, Tool, ToolSession
from engram.tools.results import (
    DEFAULT_MAX_RESULT_TOKENS,
    MIN_RESULT_TOKENS,
    cap_result,
    to_json,
)
from engram.tools.schema import Param

logger = logging.getLogger("engram.tools")

#: Every ``error.type`` a tool result can carry.
ERROR_TYPES = ("invalid_arguments", "unknown_tool", "not_found", "invalid_date", "internal")
#: Longest arguments text parsed; a model that sends more is refused.
MAX_ARGUMENTS_CHARS = 20_000


class ToolError(EngramError):
    """A tool call that failed in a way the model should be told about."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def to_json(self) -> str:
        """The error as the JSON text handed back to the model."""
        return to_json({"error": {"type": self.kind, "message": self.message}})


def dispatch(
    session: ToolSession,
    name: str,
    arguments: str | Mapping[str, Any] | None,
    *,
    max_result_tokens: int = DEFAULT_MAX_RESULT_TOKENS,
    names: Iterable[str] | None = None,
    counter: TokenCounter | None = None,
    registry: Mapping[str, Tool] | None = None,
    also_accepts: Sequence[str] = (),
) -> str:
    """Run the tool ``name`` for ``session`` and return its result as JSON text.

    Args:
        session: The bound session; tools only ever see its scope.
        name: The tool the model called.
        arguments: The arguments as the model sent them: JSON text (OpenAI)
            or an already-decoded object (Anthropic, MCP). Empty means none.
        max_result_tokens: Cap of the result, in tokens.
        names: The tools offered to the model; others are "unknown_tool".
        counter: Counter for the cap (default: the exact storage counter).
        registry: The tools to look ``name`` up in (default: :data:`TOOLS`).
        also_accepts: Arguments the caller's interface took out before this call
            (MCP's ``session``), named too when an error lists what a tool accepts.

    Returns:
        The result JSON, or ``{"error": {"type", "message"}}``.

    Raises:
        ConfigError: ``max_result_tokens`` is below the minimum (a caller bug,
            not the model's).
    """
    if max_result_tokens < MIN_RESULT_TOKENS:
        raise ConfigError(
            f"max_result_tokens must be at least {MIN_RESULT_TOKENS}, got {max_result_tokens}"
        )
    try:
        tool = _find(name, names, TOOLS if registry is None else registry)
        values = validate(tool, decode_arguments(arguments), also_accepts=also_accepts)
        result = tool.func(session, **values)
        if tool.recalls:
            if "about" not in result:  # a tool that packs to a size heads its result itself
                result = {"about": RECORDS_NOTE, "session": session.id, **result}
            _count_flags(session, result)
        capped = cap_result(
            result,
            max_tokens=max_result_tokens,
            items_key=tool.items_key,
            drop_from=tool.drop_from,
            cursor_key="next_before_id",
            counter=counter,
        )
        return to_json(capped)
    except ToolError as exc:
        return exc.to_json()
    except DateParseError as exc:
        return ToolError("invalid_date", str(exc)).to_json()
    except InvalidQuery as exc:
        return ToolError("invalid_arguments", str(exc)).to_json()
    except NotFound as exc:
        return ToolError("not_found", str(exc)).to_json()
    except Exception:
        logger.exception("tool %r failed", name)
        return ToolError("internal", f"the tool {name!r} failed; the error was logged").to_json()


def decode_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments object, decoded from JSON text when needed.

    Raises:
        ToolError: not JSON, or not a JSON object.
    """
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        if not all(isinstance(key, str) for key in arguments):
            raise ToolError("invalid_arguments", "argument names must be strings")
        return dict(arguments)
    if not isinstance(arguments, str):
        raise ToolError("invalid_arguments", "arguments must be a JSON object")
    if not arguments.strip():
        return {}
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        raise ToolError(
            "invalid_arguments", f"arguments longer than {MAX_ARGUMENTS_CHARS} characters"
        )
    try:
        decoded = json.loads(arguments)
    except (ValueError, RecursionError) as exc:
        raise ToolError("invalid_arguments", f"arguments are not valid JSON: {exc}") from None
    if not isinstance(decoded, dict):
        raise ToolError(
            "invalid_arguments", f"arguments must be a JSON object, got {type(decoded).__name__}"
        )
    return decoded


def validate(
    tool: Tool, arguments: Mapping[str, Any], *, also_accepts: Sequence[str] = ()
) -> dict[str, Any]:
    """Check arguments against the tool's derived schema; return the keyword arguments.

    ``also_accepts`` are arguments the interface handles itself: listed with the
    tool's own when an unknown one is refused.

    Raises:
        ToolError: unknown key, missing required key, wrong type, out of range
            or not one of the allowed values. The message names the parameter.
    """
    known = {param.name: param for param in tool.params}
    unknown = sorted(key for key in arguments if key not in known)
    if unknown:
        accepted = ", ".join([*known, *also_accepts]) or "none"
        raise ToolError(
            "invalid_arguments",
            f"{tool.name} has no parameter {', '.join(map(repr, unknown))}; it accepts: {accepted}",
        )
    values: dict[str, Any] = {}
    for param in tool.params:
        if param.name not in arguments or (arguments[param.name] is None and not param.required):
            if param.required:
                raise ToolError("invalid_arguments", f"{tool.name} needs {param.name!r}")
            continue
        values[param.name] = _check(tool.name, param, arguments[param.name])
    return values


def is_error(result: str) -> bool:
    """Tell whether a :func:`dispatch` result is an error rather than the tool's answer."""
    try:
        decoded = json.loads(result)
    except ValueError:
        return True
    return isinstance(decoded, dict) and isinstance(decoded.get("error"), dict)


def _find(name: Any, names: Iterable[str] | None, registry: Mapping[str, Tool]) -> Tool:
    allowed = set(names) if names is not None else None
    if (
        not isinstance(name, str)
        or name not in registry
        or (allowed is not None and name not in allowed)
    ):
        offered = [n for n in registry if allowed is None or n in allowed]
        raise ToolError("unknown_tool", f"no tool named {name!r}; available: {', '.join(offered)}")
    return registry[name]


def _check(tool: str, param: Param, value: Any) -> Any:
    where = f"{tool}: {param.name!r}"
    kind = param.json_type
    if kind == "integer":
        # JSON has one number type: 5.0 is the integer 5, 5.5 is not.
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ToolError("invalid_arguments", f"{where} must be an integer, got {_show(value)}")
    elif kind == "number":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ToolError("invalid_arguments", f"{where} must be a number, got {_show(value)}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise ToolError(
                "invalid_arguments", f"{where} must be true or false, got {_show(value)}"
            )
    elif not isinstance(value, str):
        raise ToolError("invalid_arguments", f"{where} must be a string, got {_show(value)}")
    elif not is_clean(value):
        raise ToolError("invalid_arguments", f"{where} holds a NUL or a lone surrogate")
    if param.enum is not None and value not in param.enum:
        raise ToolError(
            "invalid_arguments",
            f"{where} must be one of {', '.join(param.enum)}, got {_show(value)}",
        )
    _check_bounds(where, param, value)
    return value


def _check_bounds(where: str, param: Param, value: Any) -> None:
    if param.bounds is not None:
        low, high = param.bounds.minimum, param.bounds.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            span = (
                f"between {low} and {high}"
                if low is not None and high is not None
                else f"at least {low}"
                if low is not None
                else f"at most {high}"
            )
            raise ToolError("invalid_arguments", f"{where} must be {span}, got {value}")
    if param.length is not None and isinstance(value, str):
        shortest, longest = param.length.min_length, param.length.max_length
        if shortest is not None and len(value.strip()) < shortest:
            need = "must not be empty" if shortest <= 1 else f"needs {shortest} characters or more"
            raise ToolError("invalid_arguments", f"{where} {need}")
        if longest is not None and len(value) > longest:
            raise ToolError(
                "invalid_arguments",
                f"{where} must be at most {longest} characters, got {len(value)}",
            )


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    kind = "null" if value is None else type(value).__name__
    return f"{kind} {text[:40]}" if value is not None else kind


def _count_flags(session: ToolSession, result: JSON) -> None:
    """Tell the session (when it counts them) the flags of the records handed to the model."""
    record = getattr(session, "record_flags", None)
    if record is None:
        return
    found: list[str] = []
    for value in result.values():
        items = value if isinstance(value, list) else [value]
        found += [f for item in items if isinstance(item, dict) for f in item.get("flags", ())]
    if isinstance(result.get("flags"), list):
        found += result["flags"]
    if found:
        record(found)
