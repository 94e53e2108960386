"""Type checks of config values from JSON files and `--set`: a wrong type is one line naming the
field and what it takes, before any training starts."""
from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from typing import Any

from flowcaps.errors import FlowcapsError

_PREFIX = {"ModelConfig": "model."}  # how the CLI names a model field


def _members(tp: Any) -> tuple[Any, ...]:
    """The alternatives of a union type (`float | None`), or the type itself."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _coerce(value: Any, tp: Any) -> tuple[bool, Any]:
    """(fits, value as the field holds it): ints are taken for floats, lists for tuples."""
    for member in _members(tp):
        if member is type(None):
            if value is None:
                return True, None
        elif member is bool:
            if isinstance(value, bool):
                return True, value
        elif member is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return True, value
        elif member is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True, float(value)
        elif member is str:
            if isinstance(value, str):
                return True, value
        elif typing.get_origin(member) is tuple:
            if isinstance(value, (list, tuple)):
                item = typing.get_args(member)[0]
                fixed = [_coerce(v, item) for v in value]
                if all(ok for ok, _ in fixed):
                    return True, tuple(v for _, v in fixed)
        elif isinstance(member, type) and isinstance(value, member):
            return True, value
    return False, value


def _describe(tp: Any) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             type(None): "null"}
    parts = []
    for member in _members(tp):
        if typing.get_origin(member) is tuple:
            item = names.get(typing.get_args(member)[0], "values")
            parts.append("a list of " + item.split(" ", 1)[-1] + "s")
        else:
            parts.append(names.get(member, getattr(member, "__name__", str(member))))
    return " or ".join(parts)


def field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_types(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` with each known field's value checked against `cls`'s annotation (ints become
    floats where a float is due, lists tuples); unknown names are left to the caller."""
    hints = field_types(cls)
    out = {}
    for key, value in raw.items():
        if key in hints:
            ok, value = _coerce(value, hints[key])
            if not ok:
                raise FlowcapsError(f"{_PREFIX.get(cls.__name__, '')}{key} must be "
                                    f"{_describe(hints[key])}, got {value!r}")
        out[key] = value
    return out


def build(cls: type, raw: dict[str, Any]) -> Any:
    """`cls(**raw)` for a dict from JSON: an unknown name or a wrong type is one line."""
    unknown = set(raw) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise FlowcapsError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    return cls(**check_types(cls, raw))


def _refuse_unknown(cls: type, names: Any, what: str) -> None:
    """One line for the first name `cls` lacks: the closest field, then all of them, as
    `--set` spells them (a TrainConfig's `model` stands for the `model.KEY` fields)."""
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = [name for name in names if name not in known]
    if not unknown:
        return
    prefix = _PREFIX.get(cls.__name__, "")
    close = difflib.get_close_matches(unknown[0], known, n=1)
    hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
    listed = ", ".join("model.KEY" if k == "model" else prefix + k for k in known)
    raise FlowcapsError(f"unknown {what} field {prefix}{unknown[0]}{hint}; the {what} "
                        f"fields are: {listed}")


def replaced(obj: Any, changes: dict[str, Any], what: str) -> Any:
    """`dataclasses.replace` with checked types: an unknown name is one line naming `what`,
    the closest field and every field."""
    _refuse_unknown(type(obj), changes, what)
    return dataclasses.replace(obj, **check_types(type(obj), changes))


def parse_text(cls: type, key: str, text: str) -> Any:
    """A `--set key=value` value: JSON (numbers, true/false, null, lists), except that a string
    field takes the text as it is (`--set out=123` is the folder "123") unless the JSON value
    fits another type the field allows (`--set bf16=true` is True, `--set bf16=auto` "auto")."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    tp = field_types(cls).get(key)
    if tp is not None and str in _members(tp) and not _coerce(value, tp)[0]:
        return text
    return value
