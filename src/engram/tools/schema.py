"""Tool schemas derived from typed Python functions, never written twice by hand.

A tool is a function whose first parameter is the bound session (hidden from
the model) and whose other parameters are typed with ``str``, ``int``,
``float``, ``bool``, a ``Literal`` of strings, or any of those ``| None``,
optionally wrapped in ``Annotated[..., Range(...)]`` or ``Annotated[...,
Length(...)]``. Its Google-style docstring gives the description (everything
before the first section) and, in ``Args:``, one description per parameter.

From that one source come the JSON Schema of the parameters, the four wire
shapes of :data:`FLAVORS`, and the validation the dispatcher applies.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from engram.errors import ConfigError
from engram.models import JSON

#: Wire shapes :func:`engram.tools.schemas` can produce.
FLAVORS = ("openai", "responses", "anthropic", "mcp")

Flavor = Literal["openai", "responses", "anthropic", "mcp"]

_JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_SECTION = re.compile(r"^(Args|Arguments|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class Range:
    """Inclusive bounds of a number parameter (``None``: unbounded on that side)."""

    minimum: int | float | None = None
    maximum: int | float | None = None


@dataclass(frozen=True, slots=True)
class Length:
    """Inclusive bounds on the length of a string parameter."""

    min_length: int | None = None
    max_length: int | None = None


@dataclass(frozen=True, slots=True)
class Param:
    """One model-visible parameter of a tool, as derived from its signature."""

    name: str
    json_type: str
    description: str
    required: bool
    default: Any = None
    nullable: bool = False
    enum: tuple[str, ...] | None = None
    bounds: Range | None = None
    length: Length | None = None

    def schema(self) -> JSON:
        """This parameter's JSON Schema."""
        out: JSON = {"type": self.json_type, "description": self.description}
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.bounds is not None:
            if self.bounds.minimum is not None:
                out["minimum"] = self.bounds.minimum
            if self.bounds.maximum is not None:
                out["maximum"] = self.bounds.maximum
        if self.length is not None:
            if self.length.min_length is not None:
                out["minLength"] = self.length.min_length
            if self.length.max_length is not None:
                out["maxLength"] = self.length.max_length
        if not self.required and self.default is not None:
            out["default"] = self.default
        return out


def derive(func: Callable[..., Any]) -> tuple[str, tuple[Param, ...]]:
    """The description and model-visible parameters of a tool function.

    Raises:
        ConfigError: the function has no docstring, an undocumented or
            unsupported parameter, or no session parameter first.
    """
    name = func.__name__
    doc = inspect.getdoc(func)
    if not doc:
        raise ConfigError(f"tool {name}: needs a docstring (its first line is the description)")
    description, arg_docs = _parse_docstring(doc)
    signature = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)
    listed = list(signature.parameters.values())
    if not listed or listed[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise ConfigError(f"tool {name}: the first parameter must be the session")
    params = []
    for parameter in listed[1:]:
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ConfigError(f"tool {name}: *args and **kwargs cannot be described to a model")
        if parameter.name not in arg_docs:
            raise ConfigError(f"tool {name}: parameter {parameter.name!r} is not in Args:")
        params.append(
            _param(name, parameter, hints.get(parameter.name, str), arg_docs[parameter.name])
        )
    return description, tuple(params)


def parameters_schema(params: tuple[Param, ...]) -> JSON:
    """The JSON Schema object of a tool's parameters."""
    schema: JSON = {
        "type": "object",
        "properties": {p.name: p.schema() for p in params},
        "additionalProperties": False,
    }
    required = [p.name for p in params if p.required]
    if required:
        schema["required"] = required
    return schema


def wire_schema(flavor: str, name: str, description: str, parameters: JSON) -> JSON:
    """One tool in the shape a provider expects.

    Raises:
        ConfigError: ``flavor`` is not one of :data:`FLAVORS`.
    """
    if flavor == "openai":
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }
    if flavor == "responses":
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": False,
        }
    if flavor == "anthropic":
        return {"name": name, "description": description, "input_schema": parameters}
    if flavor == "mcp":
        return {"name": name, "description": description, "inputSchema": parameters}
    raise ConfigError(f"unknown tool schema flavor {flavor!r}; use one of {', '.join(FLAVORS)}")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Description (text before the first section) and the Args entries."""
    lines = doc.splitlines()
    intro: list[str] = []
    index = 0
    while index < len(lines) and not _SECTION.match(lines[index].strip()):
        intro.append(lines[index].strip())
        index += 1
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for raw in lines[index:]:
        stripped = raw.strip()
        header = _SECTION.match(stripped)
        if header and not raw.startswith(" "):
            in_args = header.group(1) in ("Args", "Arguments")
            current = None
            continue
        if not in_args or not stripped:
            continue
        indent = len(raw) - len(raw.lstrip())
        match = _ARG_LINE.match(stripped)
        if match and indent <= 4:
            current = match.group(1)
            args[current] = match.group(2)
        elif current is not None:
            args[current] = f"{args[current]} {stripped}"
    description = " ".join(" ".join(intro).split())
    return description, {key: " ".join(value.split()) for key, value in args.items()}


def _param(tool: str, parameter: inspect.Parameter, hint: Any, doc: str) -> Param:
    bounds: Range | None = None
    length: Length | None = None
    nullable = False
    # Annotated may wrap the whole hint or sit inside "| None": unwrap both places.
    for _ in range(2):
        if get_origin(hint) is Annotated:
            hint, *extras = get_args(hint)
            for extra in extras:
                if isinstance(extra, Range):
                    bounds = extra
                elif isinstance(extra, Length):
                    length = extra
        if get_origin(hint) in (Union, types.UnionType):
            members = [arg for arg in get_args(hint) if arg is not type(None)]
            nullable = nullable or len(members) < len(get_args(hint))
            if len(members) != 1:
                raise ConfigError(f"tool {tool}: parameter {parameter.name!r} has a union type")
            hint = members[0]
    enum: tuple[str, ...] | None = None
    if get_origin(hint) is Literal:
        values = get_args(hint)
        if not all(isinstance(value, str) for value in values):
            raise ConfigError(f"tool {tool}: parameter {parameter.name!r}: only string literals")
        enum, json_type = tuple(values), "string"
    elif hint in _JSON_TYPES:
        json_type = _JSON_TYPES[hint]
    else:
        raise ConfigError(f"tool {tool}: parameter {parameter.name!r} has unsupported type {hint}")
    required = parameter.default is inspect.Parameter.empty
    return Param(
        name=parameter.name,
        json_type=json_type,
        description=doc,
        required=required,
        default=None if required else parameter.default,
        nullable=nullable,
        enum=enum,
        bounds=bounds,
        length=length,
    )
