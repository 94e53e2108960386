"""Frame 0 of a geogen split as uint8 images, read shard by shard (half the memory of both frames).

Letters: N samples, H = W image side.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from baselines.scae.errors import ScaeError


def load_images(root: str | Path, split: str = "train", limit: int | None = None) -> np.ndarray:
    """uint8 (N, H, W, 3): frame 0 of the first `limit` samples (all when None)."""
    from geogen.dataset import open_split
    from geogen.errors import GeogenError
    try:
        # Frame 0 alone goes from each shard straight into the output: the other frames are
        # never held.
        images = open_split(root, split).read(("frames",), limit, t={"frames": 0})["frames"]
    except GeogenError as err:
        raise ScaeError(str(err)) from None
    if not len(images):
        raise ScaeError(f"{root} has no {split} samples")
    return images
