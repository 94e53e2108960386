"""What the baselines' frozen train configs share (PSD, R-NEM, Motion Grouping): reading one
from JSON and copying one with changes. Each passes its own error class, so a bad config is its
method's one-line error."""
from __future__ import annotations

import dataclasses
import json
from typing import Any


def tuples(raw: dict[str, Any]) -> dict[str, Any]:
    # JSON gives lists; the frozen dataclasses hold tuples so they stay hashable.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}


def json_object(text: str, error: type[Exception]) -> dict[str, Any]:
    """A train config's JSON text -> its fields (a fresh dict)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"train config is not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise error("train config must be a JSON object")
    return dict(raw)


def build(cls: type, raw: Any, error: type[Exception]) -> Any:
    """`cls(**raw)`, refusing what is not an object and naming the unknown fields."""
    if not isinstance(raw, dict):
        raise error(f"{cls.__name__} must be a JSON object")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(raw) - names
    if unknown:
        raise error(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    return cls(**tuples(raw))


def replaced(cfg: Any, changes: dict[str, Any], error: type[Exception]) -> Any:
    """A copy of `cfg` with some fields changed; `model` may be a dict of model-field changes."""
    changes = tuples(changes)
    model = changes.pop("model", None)
    try:
        if isinstance(model, dict):
            model = dataclasses.replace(cfg.model, **tuples(model))
        if model is not None:
            changes["model"] = model
        return dataclasses.replace(cfg, **changes)
    except TypeError as err:
        raise error(f"unknown config field: {err}") from None


def loop_config(cfg: Any):
    """The shared loop's settings from a train config with the common fields (PSD's and Motion
    Grouping's; R-NEM and SCAE add validation or their own budget): the budget in `steps`,
    `max_minutes` only the loop's time guard."""
    import trainloop
    return trainloop.LoopConfig(
        out=cfg.out, seed=cfg.seed, batch_size=cfg.batch_size, steps=cfg.steps,
        max_minutes=cfg.max_minutes, device=cfg.device, threads=cfg.threads or 0,
        explode_factor=cfg.explode_factor, log_every=cfg.log_every,
        checkpoint_minutes=cfg.checkpoint_minutes)
