"""Checkpoints: a dict of tensors, numbers and JSON strings, safe for `weights_only=True`.

Two kinds share one format: the run's `checkpoint.pt` (with optimiser and progress, for
resuming) and the exported `model.pt` (config and weights only), in the file format of the
shared loop (`trainloop.checkpoint`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError
from flowcaps.model import FlowCapsules
from trainloop.checkpoint import meta_of, read_blob, write_blob  # noqa: F401  (this module's API)
from trainloop.device import resolve_device

FORMAT = "flowcaps-checkpoint-v1"


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
    """Rebuild the exact model a checkpoint was trained with, in eval mode, on `device`
    (cpu, cuda, cuda:N or auto; a device this machine lacks is one FlowcapsError)."""
    target = resolve_device(str(device), FlowcapsError)
    blob = read(path)
    model = FlowCapsules(config_of(blob).model)
    try:
        model.load_weights(blob["model"])
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise FlowcapsError(f"checkpoint {path} does not match its config: {first}") from None
    return model.to(target).eval()
