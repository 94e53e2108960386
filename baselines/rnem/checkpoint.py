"""Checkpoints: a dict of tensors, numbers and JSON strings, safe for `weights_only=True`.

The run's `checkpoint.pt` (with optimiser state and progress, for resuming) and the exported
`model.pt` (config and weights) share one format. Both are written to a temporary name and
renamed, so a half-written file never looks complete.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from baselines.rnem.config import TrainConfig
from baselines.rnem.errors import RnemError
from baselines.rnem.model import RNEM

FORMAT = "rnem-checkpoint-v1"


def save(path: str | Path, config: TrainConfig, model: RNEM, *,
         optimizer: torch.optim.Optimizer | None = None, progress: dict[str, Any] | None = None,
         meta: dict[str, Any] | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob: dict[str, Any] = {
        "format": FORMAT,
        "config": config.to_json(),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "meta": json.dumps(meta or {}, sort_keys=True),
    }
    if optimizer is not None:
        blob["optimizer"] = optimizer.state_dict()
    if progress is not None:
        blob["progress"] = json.dumps(progress, sort_keys=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)
    return path


def read(path: str | Path) -> dict[str, Any]:
    """The raw checkpoint dict, with a one-line error for a missing, corrupt or foreign file."""
    path = Path(path)
    if not path.is_file():
        raise RnemError(f"checkpoint {path} does not exist")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for truncated or foreign files
        raise RnemError(f"cannot read checkpoint {path}: corrupt or not a torch file "
                        f"({type(err).__name__})") from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise RnemError(f"{path} is not an R-NEM checkpoint (format {FORMAT} expected)")
    for key in ("config", "model", "meta"):
        if key not in blob:
            raise RnemError(f"checkpoint {path} lacks {key!r}")
    return blob


def config_of(blob: dict[str, Any]) -> TrainConfig:
    return TrainConfig.from_json(blob["config"])


def meta_of(blob: dict[str, Any]) -> dict[str, Any]:
    return json.loads(blob["meta"])


def load(path: str | Path, device: str | torch.device = "cpu") -> RNEM:
    """Rebuild the exact model a checkpoint was trained with, in eval mode."""
    blob = read(path)
    model = RNEM(config_of(blob).model)
    try:
        model.load_weights(blob["model"])
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise RnemError(f"checkpoint {path} does not match its config: {first}") from None
    return model.to(device).eval()
