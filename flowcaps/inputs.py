"""Images handed to the model's inference calls: the forms accepted, and one-line refusals.

Letters: B batch, H = W image side.

Accepted: a torch tensor or numpy array holding one image or a batch, either uint8 in 0-255
(as geogen stores frames) or float in [0, 1], channels-first (B, 3, H, W) or channels-last
(B, H, W, 3), with H = W the model's image size. The result is float32 (B, 3, H, W) in [0, 1]
on the model's device; a single image gets B = 1.
"""
from __future__ import annotations

import numpy as np
import torch

from flowcaps.errors import FlowcapsError

# Float images a little outside [0, 1] (resampling, colour jitter) are still images in [0, 1];
# anything beyond this is most likely 0-255 data stored as float.
FLOAT_SLACK = 1e-3


def _expected(size: int) -> str:
    return (f"expected images as uint8 (B, {size}, {size}, 3) like geogen's frames, or float "
            f"(B, 3, {size}, {size}) in [0, 1] (numpy or torch; the batch axis is optional)")


def as_images(images, size: int, device: torch.device) -> torch.Tensor:
    """-> float32 (B, 3, H, W) in [0, 1] on `device`, or a FlowcapsError saying what is expected."""
    if isinstance(images, np.ndarray):
        if images.dtype.kind not in "uif":
            raise FlowcapsError(f"images of dtype {images.dtype}: {_expected(size)}")
        images = torch.from_numpy(np.ascontiguousarray(images))
    elif not isinstance(images, torch.Tensor):
        raise FlowcapsError(f"images of type {type(images).__name__}: {_expected(size)}")
    x = images
    shape = tuple(x.shape)
    if x.dim() == 3:
        x = x[None]  # (1, ...): one image
    if x.dim() != 4:
        hint = "; for geogen frames (N, T, H, W, 3) pass frames[:, t]" if x.dim() == 5 else ""
        raise FlowcapsError(f"images of shape {list(shape)}{hint}: {_expected(size)}")
    if x.shape[1] == 3 and x.shape[2:] == (size, size):
        pass  # (B, 3, H, W)
    elif x.shape[3] == 3 and x.shape[1:3] == (size, size):
        x = x.permute(0, 3, 1, 2)  # (B, 3, H, W)
    else:
        raise FlowcapsError(f"images of shape {list(shape)} for a model of {size} px: "
                            f"{_expected(size)}")
    if x.dtype == torch.uint8:
        return (x.to(device).float() / 255).contiguous()  # (B, 3, H, W)
    if not x.is_floating_point():
        raise FlowcapsError(f"images of dtype {str(x.dtype).replace('torch.', '')}: "
                            f"{_expected(size)}")
    x = x.to(device, torch.float32)
    if x.numel():
        lo, hi = float(x.min()), float(x.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise FlowcapsError("images hold NaN or infinite values")
        if lo < -FLOAT_SLACK or hi > 1 + FLOAT_SLACK:
            raise FlowcapsError(f"float images must be in [0, 1], got values in [{lo:.3g}, "
                                f"{hi:.3g}] (for 0-255 data pass uint8, or divide by 255)")
    return x.contiguous()
