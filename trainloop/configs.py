"""Typed configs from JSON and `--set`, for every method: a frozen dataclass built from a dict,
copied with changes, and a `--set` value parsed, where a wrong type or an unknown name is one
line naming the field (as `--set` spells it) before any training starts.

Each method passes its own error class, so a bad config is its method's one-line error. A
method's config holds the loop's settings in its `loop` field (a `LoopConfig`); `nest_loop`
maps the flat form that configs stored before had onto it, and `replaced` takes a loop
field's bare name (`seed`) as `loop.seed`.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
from typing import Any

from trainloop.loop import LoopConfig

LOOP = "loop"  # the field of a method's config that holds its LoopConfig
LOOP_FIELDS = frozenset(f.name for f in dataclasses.fields(LoopConfig))


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


def _groups(cls: type) -> dict[str, type]:
    """The fields of `cls` that hold a config dataclass (`model`, `loop`): name -> class."""
    return {name: tp for name, tp in field_types(cls).items() if dataclasses.is_dataclass(tp)}


def check_types(cls: type, raw: dict[str, Any], error: type[Exception],
                prefix: str = "") -> dict[str, Any]:
    """`raw` with each known field's value checked against `cls`'s annotation (ints become
    floats where a float is due, lists tuples); unknown names are left to the caller.
    `prefix` is how `--set` names the fields of this group (e.g. "model.")."""
    hints = field_types(cls)
    out = {}
    for key, value in raw.items():
        if key in hints:
            ok, value = _coerce(value, hints[key])
            if not ok:
                raise error(f"{prefix}{key} must be {_describe(hints[key])}, got {value!r}")
            # NaN or inf from a JSON file or `--lr nan` would pass every range check after it
            # (each comparison with NaN is False) and train on garbage.
            if any(isinstance(v, float) and not math.isfinite(v)
                   for v in (value if isinstance(value, tuple) else (value,))):
                raise error(f"{prefix}{key} must be a finite number, got {value!r}")
        out[key] = value
    return out


def json_object(text: str, error: type[Exception]) -> dict[str, Any]:
    """A train config's JSON text -> its fields (a fresh dict)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"train config is not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise error("train config must be a JSON object")
    return dict(raw)


def build(cls: type, raw: Any, error: type[Exception], prefix: str = "") -> Any:
    """`cls(**raw)` for a dict from JSON, its groups (`model`, `loop`, ...) built from their
    dicts: what is not an object, an unknown name or a wrong type is one line."""
    if not isinstance(raw, dict):
        raise error(f"{cls.__name__} must be a JSON object")
    unknown = set(raw) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise error(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    raw = dict(raw)
    for name, group in _groups(cls).items():
        if isinstance(raw.get(name), dict):
            raw[name] = build(group, raw[name], error, f"{prefix}{name}.")
    return cls(**check_types(cls, raw, error, prefix))


def nest_loop(raw: dict[str, Any], default: LoopConfig,
              renames: dict[str, str] | None = None) -> dict[str, Any]:
    """A stored config's dict with its loop settings under `loop`: configs written before the
    loop had its own field held them flat beside the method's (`seed`, `out`, ...; `renames`
    maps a method's old name to the loop's, e.g. pairs -> rows). A loop field the dict does
    not give takes `default`'s value (the method's, where it differs from LoopConfig's)."""
    raw = dict(raw)
    for old, new in (renames or {}).items():
        if old in raw:
            raw[new] = raw.pop(old)
    flat = {k: raw.pop(k) for k in list(raw) if k in LOOP_FIELDS}
    if "threads" in flat and flat["threads"] is None:
        flat["threads"] = 0  # torch's default: what the loop's 0 (the cores) has always given
    loop = raw.get(LOOP, {})
    if isinstance(loop, dict):
        raw[LOOP] = {**dataclasses.asdict(default), **flat, **loop}
    return raw


def _refuse_unknown(cls: type, names: Any, error: type[Exception], what: str,
                    prefix: str) -> None:
    """One line for the first name `cls` lacks: the closest field, then all of them, as
    `--set` spells them (a group such as `model` stands for its `model.KEY` fields)."""
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = [name for name in names if name not in known]
    if not unknown:
        return
    close = difflib.get_close_matches(unknown[0], known, n=1)
    hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
    groups = _groups(cls)
    listed = ", ".join(f"{prefix}{k}.KEY" if k in groups else prefix + k for k in known)
    raise error(f"unknown {what} field {prefix}{unknown[0]}{hint}; the {what} fields are: "
                f"{listed}")


def route(cls: type, changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` with each name of a loop field that `cls` does not hold itself (`seed`) and
    each dotted name (`loop.seed`, `model.lr`) moved into its group's dict."""
    groups = _groups(cls)
    own = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in changes.items():
        group, _, name = key.partition(".")
        if name and group in groups:
            out.setdefault(group, {})[name] = value
        elif key not in own and key in LOOP_FIELDS and groups.get(LOOP) is LoopConfig:
            out.setdefault(LOOP, {})[key] = value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def replaced(obj: Any, changes: dict[str, Any], error: type[Exception], what: str = "config",
             prefix: str = "") -> Any:
    """`dataclasses.replace` with checked types: a group (`model`, `loop`) may be given a dict
    of its changes, a loop field by its bare name; an unknown name is one line naming `what`,
    the closest field and every field."""
    cls = type(obj)
    changes = route(cls, changes)
    _refuse_unknown(cls, changes, error, what, prefix)
    for name in _groups(cls):
        if isinstance(changes.get(name), dict):
            changes[name] = replaced(getattr(obj, name), changes[name], error,
                                     f"{what} {name}" if what != "config" else f"{name} config",
                                     f"{prefix}{name}.")
    return dataclasses.replace(obj, **check_types(cls, changes, error, prefix))


def parse_text(cls: type, key: str, text: str) -> Any:
    """A `--set key=value` value: JSON (numbers, true/false, null, lists), except that a string
    field takes the text as it is (`--set out=123` is the folder "123") unless the JSON value
    fits another type the field allows (`--set bf16=true` is True, `--set bf16=auto` "auto").
    `key` may be dotted (`model.lr`, `loop.seed`) or a loop field's bare name."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    group, _, name = key.partition(".")
    groups = _groups(cls)
    if name and group in groups:
        cls, key = groups[group], name
    elif key not in field_types(cls) and key in LOOP_FIELDS:
        cls = LoopConfig
    tp = field_types(cls).get(key)
    if tp is not None and str in _members(tp) and not _coerce(value, tp)[0]:
        return text
    return value
