"""Checkpoint files shared by the baselines: a dict of tensors and JSON strings that
`torch.load(..., weights_only=True)` reads, written to a temporary name and renamed, so a
half-written file never looks complete.

Each baseline's own `checkpoint` module names its format, its error and its model; this module
holds what they share, on top of the shared loop's file format (`trainloop.checkpoint`).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from trainloop.checkpoint import meta_of, read_blob, write_blob  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class Kind:
    """One baseline's checkpoints: its format tag, the error it raises, its config class (with
    to_json/from_json) and how a model is built from that config."""

    format: str
    what: str  # "a PSD": names the expected kind in errors
    error: type[Exception]
    config: type
    build: Callable[[Any], torch.nn.Module]

    def save(self, path: str | Path, config: Any, model: torch.nn.Module, *,
             optimizer: torch.optim.Optimizer | None = None,
             progress: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Path:
        return write(path, self.format, config.to_json(), model, optimizer=optimizer,
                     progress=progress, meta=meta)

    def read(self, path: str | Path) -> dict[str, Any]:
        return read(path, self.format, self.what, self.error)

    def config_of(self, blob: dict[str, Any]) -> Any:
        return self.config.from_json(blob["config"])

    def load_weights(self, model: torch.nn.Module, state: dict[str, torch.Tensor],
                     path: str | Path) -> None:
        load_state(model, state, path, self.error)

    def load(self, path: str | Path, device: str | torch.device = "cpu") -> torch.nn.Module:
        """Rebuild the exact model a checkpoint was trained with, in eval mode."""
        blob = self.read(path)
        model = self.build(self.config_of(blob))
        self.load_weights(model, blob["model"], path)
        return model.to(device).eval()


def write(path: str | Path, fmt: str, config_json: str, model: torch.nn.Module, *,
          optimizer: torch.optim.Optimizer | None = None, progress: dict[str, Any] | None = None,
          meta: dict[str, Any] | None = None) -> Path:
    """Config, weights and meta (plus the optimiser and progress of a resumable run)."""
    return write_blob(path, fmt, config_json, model, optimizer=optimizer, progress=progress,
                      meta=meta)


def read(path: str | Path, fmt: str, what: str, error: type[Exception]) -> dict[str, Any]:
    """The raw dict; `error` with one line for a missing, corrupt or foreign file (`what` names
    the kind of checkpoint expected, e.g. "a PSD")."""
    if not Path(path).is_file():
        raise error(f"checkpoint {path} does not exist")
    return read_blob(path, fmt, what, error)


def load_state(model: torch.nn.Module, state: dict[str, torch.Tensor], path: str | Path,
               error: type[Exception]) -> None:
    """Weights into a model built from the checkpoint's own config; one line if they differ."""
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise error(f"checkpoint {path} does not match its config: {first}") from None


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
