"""Checkpoints: a dict of tensors, numbers and JSON strings, safe for `weights_only=True`.

Two kinds share one format: the run's `checkpoint.pt` (with optimiser and progress, for
resuming) and the exported `model.pt` (config and weights only). Both are written to a
temporary name and renamed, so a half-written file never looks complete.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError
from flowcaps.model import FlowCapsules

FORMAT = "flowcaps-checkpoint-v1"


def write_blob(path: str | Path, fmt: str, config_json: str, model: torch.nn.Module, *,
               optimizer: torch.optim.Optimizer | None = None,
               progress: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Path:
    """Format tag, config, weights and meta (plus the optimiser and progress of a resumable run),
    written to a temporary name and renamed. The baselines' checkpoints use it too."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob: dict[str, Any] = {
        "format": fmt,
        "config": config_json,
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


def read_blob(path: str | Path, fmt: str, what: str, error: type[Exception]) -> dict[str, Any]:
    """The raw dict of an existing file; `error` with one line for a corrupt or foreign one
    (`what` names the kind expected, e.g. "a flowcaps")."""
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for truncated or foreign files
        raise error(f"cannot read checkpoint {path}: corrupt or not a torch file "
                    f"({type(err).__name__})") from None
    if not isinstance(blob, dict) or blob.get("format") != fmt:
        raise error(f"{path} is not {what} checkpoint (format {fmt} expected)")
    for key in ("config", "model", "meta"):
        if key not in blob:
            raise error(f"checkpoint {path} lacks {key!r}")
    return blob


def save(path: str | Path, config: TrainConfig, model: FlowCapsules, *,
         optimizer: torch.optim.Optimizer | None = None, progress: dict[str, Any] | None = None,
         meta: dict[str, Any] | None = None) -> Path:
    return write_blob(path, FORMAT, config.to_json(), model, optimizer=optimizer,
                      progress=progress, meta=meta)


def read(path: str | Path) -> dict[str, Any]:
    """The raw checkpoint dict, with a clear error for a missing, corrupt or foreign file."""
    if not Path(path).is_file():
        raise FlowcapsError(f"no checkpoint at {path}")
    return read_blob(path, FORMAT, "a flowcaps", FlowcapsError)


def config_of(blob: dict[str, Any]) -> TrainConfig:
    return TrainConfig.from_json(blob["config"])


def load(path: str | Path, device: str | torch.device = "cpu") -> FlowCapsules:
    """Rebuild the exact model a checkpoint was trained with, in eval mode."""
    blob = read(path)
    model = FlowCapsules(config_of(blob).model)
    try:
        model.load_weights(blob["model"])
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise FlowcapsError(f"checkpoint {path} does not match its config: {first}") from None
    return model.to(device).eval()


def meta_of(blob: dict[str, Any]) -> dict[str, Any]:
    return json.loads(blob["meta"])
