"""SCAE (Kosiorek et al., NeurIPS 2019) in PyTorch, and FlowSCAE: SCAE's object capsules on
FlowCapsules' parts (Sabour et al., ICML 2021, Table 2).

`train_scae(cfg, data_root)` trains PCAE + OCAE on frame 0 of a geogen dataset;
`train_flowscae(cfg, parts)` trains an OCAE on part capsules (N, M, 6 + 1 + F) that the caller
made (the FlowCapsules encoder lives outside this package); `load(path)` rebuilds either.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from baselines.scae.checkpoint import load
from baselines.scae.config import SCAEConfig, profile
from baselines.scae.errors import ScaeError
from baselines.scae.model import FlowSCAE, SCAE

__all__ = ["FlowSCAE", "SCAE", "SCAEConfig", "ScaeError", "load", "profile", "train_flowscae",
           "train_scae"]


def train_scae(cfg: SCAEConfig, data_root: str | Path, *, progress: bool = True) -> Path:
    """Train SCAE on frame 0 of the train split; returns the exported model's path."""
    import torch
    import trainloop
    from baselines.scae.data import load_images
    from baselines.scae.trainer import fit
    if cfg.kind != "scae":
        raise ScaeError("train_scae needs a config of kind 'scae'")
    images = load_images(data_root, "train")  # (N, H, W, 3)
    if images.shape[1] != cfg.pcae.image_size:
        raise ScaeError(f"{data_root} holds {images.shape[1]} px images, the config expects "
                        f"{cfg.pcae.image_size}")
    with trainloop.errors_as(ScaeError):
        meta = trainloop.data_meta(data_root)
    return fit(cfg, torch.from_numpy(images), progress=progress, meta=meta)


def train_flowscae(cfg: SCAEConfig, parts: np.ndarray, *, progress: bool = True,
                   meta: dict[str, Any] | None = None) -> Path:
    """Train FlowSCAE's OCAE on part capsules (N, M, 6 + 1 + F) float."""
    import torch
    from baselines.scae.trainer import fit
    want = (cfg.parts.n_parts, 7 + cfg.parts.n_features)
    if cfg.kind != "flowscae" or parts.ndim != 3 or parts.shape[1:] != want:
        raise ScaeError(f"parts must be (N, {want[0]}, {want[1]}) for this flowscae config, "
                        f"got {parts.shape}")
    return fit(cfg, torch.from_numpy(np.ascontiguousarray(parts, dtype=np.float32)),
               progress=progress, meta=meta)
