"""Configuration: the user's JSON text, checked against a dataclass.

A processor declares its configuration as a dataclass whose fields all have
defaults (the host passes `{}` when the user gives none):

    @dataclass
    class Config:
        turns: int = 4
        roles: List[str] = field(default_factory=lambda: ["tool"])

`parse_config(text, Config)` gives a `Config`, or raises `BadConfig` with a
message that names the key, as the Rust SDK's does:

    `turns`: invalid type: string "four", expected an integer
    unknown field `turn`, expected one of `turns`, `roles`

Unknown keys are refused, so that a misspelt key is an error rather than a
silent default. A field without a default is required. The field types
understood are `bool`, `int`, `float`, `str`, `Any`, `Optional[T]`,
`List[T]`, `Dict[str, T]` and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, Dict, List, Type, TypeVar

from .errors import BadConfig

T = TypeVar("T")


@dataclasses.dataclass
class NoConfig:
    """A configuration with no settings: accepts `{}` (or none) and refuses
    any key."""


def parse_config(text: str, cls: Type[T]) -> T:
    """Parses the configuration `text` into the dataclass `cls`. An empty text
    or `null` is the default configuration."""
    text = text.strip()
    if text in ("", "null"):
        return _build(cls, {}, "")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadConfig(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return _convert(value, cls, "")


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    """The resolved field types of the dataclass `cls`, worked out once."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def prepare(cls: type) -> None:
    """Resolves the field types of `cls` and of the dataclasses it holds
    ahead of time. `export` calls it, so in a component the work is done at
    build time and kept in the snapshot rather than redone by every call."""
    stack = [cls]
    while stack:
        tp = stack.pop()
        if dataclasses.is_dataclass(tp) and tp not in _HINTS:
            stack.extend(_hints(tp).values())
        stack.extend(typing.get_args(tp))


def _describe(value: Any) -> str:
    """A JSON value as serde names it in its errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def _fail(path: str, message: str) -> BadConfig:
    return BadConfig(f"`{path}`: {message}" if path else message)


def _expected(tp: Any) -> str:
    """What a type is called in an error: `expected an integer`."""
    origin = typing.get_origin(tp)
    if tp is bool:
        return "a boolean"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if origin in (list, List):
        return "a list"
    if origin in (dict, Dict) or dataclasses.is_dataclass(tp):
        return "an object"
    return str(tp)


def _convert(value: Any, tp: Any, path: str) -> Any:
    """`value` (parsed JSON) as type `tp`, or a `BadConfig` naming `path`."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any or tp is object:
        return value
    if origin is typing.Union:
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _convert(value, rest[0], path)
        for option in rest:
            try:
                return _convert(value, option, path)
            except BadConfig:
                continue
        raise _fail(path, f"invalid value: {_describe(value)}, expected one of {rest}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an object")
        return _build(tp, value, path)
    ok = {
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        str: lambda v: isinstance(v, str),
    }
    if tp in ok:
        if not ok[tp](value):
            raise _fail(path, f"invalid type: {_describe(value)}, expected {_expected(tp)}")
        return float(value) if tp is float else value
    if origin in (list, List):
        if not isinstance(value, list):
            raise _fail(path, f"invalid type: {_describe(value)}, expected a list")
        item = args[0] if args else Any
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, Dict):
        if not isinstance(value, dict):
            raise _fail(path, f"invalid type: {_describe(value)}, expected an object")
        item = args[1] if len(args) == 2 else Any
        return {k: _convert(v, item, f"{path}.{k}" if path else k) for k, v in value.items()}
    raise TypeError(f"configuration field `{path}` has a type the SDK cannot read: {tp!r}")


def _build(cls: Any, value: Dict[str, Any], path: str) -> Any:
    """The dataclass `cls` from the JSON object `value`."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    hints = _hints(cls)
    names = [f.name for f in fields]
    for key in value:
        if key not in names:
            expected = ", ".join(f"`{n}`" for n in names)
            message = (
                f"unknown field `{key}`, expected one of {expected}"
                if names
                else f"unknown field `{key}`, there are no fields"
            )
            raise _fail(path, message)
    kwargs = {}
    for f in fields:
        at = f"{path}.{f.name}" if path else f.name
        if f.name in value:
            kwargs[f.name] = _convert(value[f.name], hints.get(f.name, Any), at)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _fail(path, f"missing field `{f.name}`")
    return cls(**kwargs)
