"""Checkpoints: a dict of tensors and JSON strings, read with `torch.load(weights_only=True)`.

The run's `checkpoint.pt` also holds the optimiser and progress (for resuming); the exported
`model.pt` holds the config and weights. Both are written to a temporary name, then renamed.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from baselines.scae.config import SCAEConfig
from baselines.scae.errors import ScaeError
from baselines.scae.model import build

FORMAT = "scae-checkpoint-v1"


def save(path: str | Path, config: SCAEConfig, model: torch.nn.Module, *,
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
    """The raw dict, with one clear error for a missing, corrupt or foreign file."""
    path = Path(path)
    if not path.is_file():
        raise ScaeError(f"no checkpoint at {path}")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for truncated or foreign files
        raise ScaeError(f"cannot read checkpoint {path}: corrupt or not a torch file "
                        f"({type(err).__name__})") from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ScaeError(f"{path} is not an SCAE checkpoint (format {FORMAT} expected)")
    for key in ("config", "model", "meta"):
        if key not in blob:
            raise ScaeError(f"checkpoint {path} lacks {key!r}")
    return blob


def config_of(blob: dict[str, Any]) -> SCAEConfig:
    return SCAEConfig.from_json(blob["config"])


def meta_of(blob: dict[str, Any]) -> dict[str, Any]:
    return json.loads(blob["meta"])


def load(path: str | Path, device: str | torch.device = "cpu") -> torch.nn.Module:
    """Rebuild the exact model a checkpoint holds, in eval mode."""
    blob = read(path)
    model = build(config_of(blob))
    try:
        model.load_state_dict(blob["model"])
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise ScaeError(f"checkpoint {path} does not match its config: {first}") from None
    return model.to(device).eval()


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
