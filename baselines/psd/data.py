"""The training data PSD needs: frame pairs and the ground-truth flow between them.

Letters: N pairs, H = W image side.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from baselines.psd.errors import PsdError

READ_CHUNK = 2048  # pairs converted at a time: the float32 flow is never held for more


def load_train(root: str | Path, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Frames (N, 2, H, W, 3) uint8 and flow frame 0 -> 1 (N, H, W, 2) float16 in pixels.

    The first two frames of each of the first `limit` clips. Flow is held as float16 (1/64 px
    steps at 13 px, finer below) to halve the memory of a 40k-pair set; it is converted
    READ_CHUNK pairs at a time, so the float32 copy never exists whole.
    """
    from geogen.dataset import open_split  # only needed when reading a dataset
    from geogen.errors import GeogenError

    try:
        train = open_split(root, "train")
        if "flow" not in train.fields:
            raise PsdError(f"{root} stores no flow; PSD trains on ground-truth flow")
        pair = train.read(("frames", "flow"), limit, t={"frames": slice(0, 2), "flow": 0},
                          dtypes={"flow": np.float16}, chunk=READ_CHUNK)
    except GeogenError as err:  # a bad folder, request or shard: one line for the user
        raise PsdError(f"cannot read the train split of {root}: {err}") from None
    if not len(pair["frames"]):
        raise PsdError(f"{root} has no train pairs")
    return pair["frames"], pair["flow"]


def load_visible(root: str | Path, limit: int) -> np.ndarray:
    """The visible part labels of frame 0 (N, H, W) uint8 of the first `limit` train pairs
    (0 background, s + 1 part s), for the probe; an empty array where none are stored."""
    from geogen.dataset import open_split
    from geogen.errors import GeogenError

    try:
        train = open_split(root, "train")
        if "visible" not in train.fields or limit < 1:
            return np.zeros((0, 1, 1), np.uint8)
        return train.read(("visible",), limit, t={"visible": 0})["visible"]
    except GeogenError as err:
        raise PsdError(f"cannot read the train split of {root}: {err}") from None


def part_names(root: str | Path) -> tuple[str, ...]:
    """The S part (slot) names of a dataset, from its manifest: what `visible`'s s + 1 name."""
    from geogen.dataset import open_split
    from geogen.errors import GeogenError

    try:
        return open_split(root, "train").slots
    except GeogenError as err:
        raise PsdError(f"cannot read the train split of {root}: {err}") from None
