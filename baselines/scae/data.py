"""Frame 0 of a geogen split as uint8 images, read shard by shard (half the memory of both frames).

Letters: N samples, H = W image side.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from baselines.scae.errors import ScaeError


def load_images(root: str | Path, split: str = "train", limit: int | None = None) -> np.ndarray:
    """uint8 (N, H, W, 3): frame 0 of the first `limit` samples (all when None)."""
    from geogen import shards
    from geogen.errors import GeogenError
    try:
        manifest = shards.read_manifest(root)
        paths = shards.shard_paths(root, manifest, split)
        total = sum(c for _, c in paths)
        want = total if limit is None else max(0, min(int(limit), total))
        size = int(manifest["size"])
        out = np.empty((want, size, size, 3), np.uint8)
        done = 0
        for path, count in paths:
            if done >= want:
                break
            take = min(count, want - done)
            with shards.open_shard(path) as f:
                for a in range(0, take, 2048):  # a chunk at a time: never both frames of all
                    b = min(a + 2048, take)
                    out[done + a:done + b] = f["frames"][a:b, 0]
            done += take
    except GeogenError as err:
        raise ScaeError(str(err)) from None
    except (OSError, KeyError) as err:
        raise ScaeError(f"{root}: cannot read the {split} frames ({err})") from None
    if want == 0:
        raise ScaeError(f"{root} has no {split} samples")
    return out
