"""The checkpoint file every method shares: a dict of tensors and JSON strings that
`torch.load(..., weights_only=True)` reads, written to a temporary name and renamed, so a
half-written file never looks complete.

A run's `checkpoint.pt` also holds the optimiser and the loop's progress (for resuming); an
exported `model.pt` holds the format tag, config, weights and meta. Each method names its own
format tag and error (`Store`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch


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
