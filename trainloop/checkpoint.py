"""The checkpoint file every method shares: a dict of tensors and JSON strings that
`torch.load(..., weights_only=True)` reads, written to a temporary name and renamed, so a
half-written file never looks complete.

A run's `checkpoint.pt` also holds the optimiser and the loop's progress (for resuming); an
exported `model.pt` holds the format tag, config, weights and meta. Each method names its own
format tag, error, config class and model in a `Kind`, which saves, reads and loads its files.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch


@dataclass(frozen=True)
class Kind:
    """One method's checkpoints: its format tag, the error it raises, its config class (with
    to_json/from_json; from_json maps the forms older files stored) and how a model is built
    from that config. A model's own `load_weights` (one that accepts the keys of older
    checkpoints) is used where it has one."""

    format: str
    what: str  # "a PSD": names the expected kind in errors
    error: type[Exception]
    config: type
    build: Callable[[Any], torch.nn.Module]

    def save(self, path: str | Path, config: Any, model: torch.nn.Module, *,
             optimizer: torch.optim.Optimizer | None = None,
             progress: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Path:
        return write_blob(path, self.format, config.to_json(), model, optimizer=optimizer,
                          progress=progress, meta=meta)

    def read(self, path: str | Path) -> dict[str, Any]:
        """The raw dict; one line for a missing, corrupt or foreign file."""
        if not Path(path).is_file():
            raise self.error(f"checkpoint {path} does not exist")
        return read_blob(path, self.format, self.what, self.error)

    def config_of(self, blob: dict[str, Any]) -> Any:
        return self.config.from_json(blob["config"])

    def load_weights(self, model: torch.nn.Module, state: dict[str, torch.Tensor],
                     path: str | Path) -> None:
        """Weights into a model built from the checkpoint's own config; one line if they differ."""
        try:
            getattr(model, "load_weights", model.load_state_dict)(state)
        except RuntimeError as err:
            first = str(err).splitlines()[0]
            raise self.error(f"checkpoint {path} does not match its config: {first}") from None

    def load(self, path: str | Path, device: str | torch.device = "cpu") -> torch.nn.Module:
        """Rebuild the exact model a checkpoint was trained with, in eval mode, on `device`
        (cpu, cuda, cuda:N or auto; a device this machine lacks is one error of its kind)."""
        from trainloop.device import resolve_device  # (imports the allocator: only when loading)
        target = resolve_device(str(device), self.error)
        blob = self.read(path)
        model = self.build(self.config_of(blob))
        self.load_weights(model, blob["model"], path)
        return model.to(target).eval()


def write_blob(path: str | Path, fmt: str, config_json: str, model: torch.nn.Module, *,
               optimizer: torch.optim.Optimizer | None = None,
               progress: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Path:
    """Format tag, config, weights and meta (plus the optimiser and progress of a resumable run),
    written to a temporary name and renamed; on a failure (OSError for a full disk) the file at
    `path` is the one there before, and no temporary file is left."""
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
    return save_blob(path, blob)


def save_blob(path: str | Path, blob: dict[str, Any]) -> Path:
    """A checkpoint dict as it is, written to a temporary name and renamed (write_blob's rule)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(blob, tmp)
        os.replace(tmp, path)
    except BaseException:  # a full disk (OSError), Ctrl-C: no half-written file is left
        tmp.unlink(missing_ok=True)
        raise
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


def meta_of(blob: dict[str, Any]) -> dict[str, Any]:
    return json.loads(blob["meta"])


def progress_of(blob: dict[str, Any]) -> dict[str, Any]:
    """A run checkpoint's progress (step, seconds, ...); {} for an exported model."""
    return json.loads(blob.get("progress", "{}"))


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
