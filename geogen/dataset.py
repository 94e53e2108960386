"""Reading a generated folder: a torch Dataset over the shards, and whole splits in memory.

Letters: N samples, T frames, S slots, H = W = image side.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from geogen import schema, shards
from geogen.errors import GeogenError


def _check_request(manifest: dict, split: str, fields: Sequence[str]) -> None:
    if split not in schema.SPLITS:
        raise GeogenError(f"unknown split {split!r} (known: {', '.join(schema.SPLITS)})")
    stored = manifest.get("fields", list(schema.REQUIRED_FIELDS))
    for name in fields:
        if name not in stored:
            raise GeogenError(f"field {name!r} is not stored here (stored: {', '.join(stored)})")


class GeoDataset(Dataset):
    """Item i of a split: {field: tensor} with the schema's dtype and per-sample shape.

    HDF5 files are opened lazily, once per process, so the dataset can be handed to DataLoader
    workers (each worker opens its own handles after the fork).
    """

    def __init__(self, root: str | Path, split: str, fields: Sequence[str] = ("frames",)):
        self.root = Path(root)
        manifest = shards.read_manifest(self.root)
        _check_request(manifest, split, fields)
        self.split, self.fields = split, tuple(fields)
        self.size, self.frames = int(manifest["size"]), int(manifest["frames"])
        self._paths = [p for p, _ in shards.shard_paths(self.root, manifest, split)]
        counts = [c for _, c in shards.shard_paths(self.root, manifest, split)]
        self._starts = np.cumsum([0] + counts)                                     # (shards + 1,)
        self._files: dict[int, object] = {}
        self._pid = None

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _file(self, k: int):
        if self._pid != os.getpid():   # a new worker process: never reuse the parent's handles
            self._files, self._pid = {}, os.getpid()
        if k not in self._files:
            self._files[k] = shards.open_shard(self._paths[k])
        return self._files[k]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"index {i} out of range for {len(self)} samples")
        i = i % len(self)
        k = int(np.searchsorted(self._starts, i, side="right") - 1)
        f = self._file(k)
        local = i - int(self._starts[k])
        return {name: torch.from_numpy(np.asarray(f[name][local])) for name in self.fields}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_files"], state["_pid"] = {}, None   # h5py handles do not pickle
        return state


def read_split(root: str | Path, split: str, fields: Sequence[str],
               limit: int | None = None) -> dict[str, np.ndarray]:
    """The whole split (or its first `limit` samples) in memory: field -> (N, ...) array."""
    root = Path(root)
    manifest = shards.read_manifest(root)
    _check_request(manifest, split, fields)
    total = int(manifest["counts"][split])
    want = total if limit is None else max(0, min(int(limit), total))
    size, frames = int(manifest["size"]), int(manifest["frames"])
    out = {name: np.empty((want,) + schema.sample_shape(name, frames, size),
                          schema.FIELDS[name].dtype) for name in fields}
    done = 0
    for path, count in shards.shard_paths(root, manifest, split):
        if done >= want:
            break
        take = min(count, want - done)
        with shards.open_shard(path) as f:
            for name in fields:
                try:
                    f[name].read_direct(out[name], np.s_[:take], np.s_[done:done + take])
                except (OSError, KeyError) as err:
                    raise GeogenError(f"{path}: cannot read {name!r} ({err})") from None
        done += take
    return out
