"""The training data PSD needs: frame pairs and the ground-truth flow between them.

Letters: N pairs, H = W image side.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from baselines.psd.errors import PsdError


def load_train(root: str | Path, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Frames (N, 2, H, W, 3) uint8 and flow frame 0 -> 1 (N, H, W, 2) float16 in pixels.

    The first two frames of each of the first `limit` clips. Flow is held as float16 (1/64 px
    steps at 13 px, finer below) to halve the memory of a 40k-pair set; it is read shard by
    shard so the float32 copy never exists whole.
    """
    from geogen import shards  # only needed when reading a dataset

    root = Path(root)
    if not (root / "manifest.json").is_file():
        raise PsdError(f"{root} is not a geogen dataset (no manifest.json)")
    try:
        manifest = shards.read_manifest(root)
        parts = shards.shard_paths(root, manifest, "train")
        if "flow" not in manifest.get("fields", ["flow"]):
            raise PsdError(f"{root} stores no flow; PSD trains on ground-truth flow")
        total = sum(c for _, c in parts)
        want = total if limit is None else min(int(limit), total)
        frames, flow, done = [], [], 0
        for path, count in parts:
            if done >= want:
                break
            take = min(count, want - done)
            with shards.open_shard(path) as f:
                frames.append(np.asarray(f["frames"][:take, :2]))
                flow.append(np.asarray(f["flow"][:take, 0]).astype(np.float16))
            done += take
    except PsdError:
        raise
    except Exception as err:  # a geogen error or a broken shard: one line for the user
        raise PsdError(f"cannot read the train split of {root}: {err}") from None
    if not frames:
        raise PsdError(f"{root} has no train pairs")
    return np.concatenate(frames), np.concatenate(flow)
