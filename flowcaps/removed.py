"""Switches removed once their experiments were written up; how saved configs naming them load.

Checkpoints, run folders and `--config` files written before still carry these keys; each is
accepted only at the value that meant "off". `docs/deviations.md` ("Tried and removed") gives
the runs behind each one.
"""
from __future__ import annotations

from typing import Any

from flowcaps.errors import FlowcapsError

MODEL_FIELDS = {"heat_offset": 0.0, "depth_code": "image", "mask_reading": "prob", "heat_block": -2,
                "enc_extra_convs": 0, "heat_window": 0, "enc_norm_kind": "group",
                "split_first_layer": True, "enc_separable": False, "enc_input_pool": 1,
                "enc_stem": "pool"}
TRAIN_FIELDS = {"blur_fade": 0.0, "w_consistency": 0.0, "w_segment": 0.0, "overlap_start": 0.0,
                "occlusion_aware": False, "edge_source": "gradient", "w_layers": 0.0,
                "window_ramp": 0.0, "w_distinct": 0.0, "distinct_margin": 0.96,
                "w_overlap": 0.0, "overlap_tau": 1.0, "mask_prior_anneal": 0.0,
                "low_res_until": 0.0, "clip_frames": 2, "w_usage": 0.0,
                "center_masks": "amodal"}


def drop(raw: dict[str, Any], removed: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A copy of `raw` without the `removed` keys; one set to anything but "off" is an error."""
    raw = dict(raw)
    for name, off in removed.items():
        value = raw.pop(name, off)
        if value != off:
            raise FlowcapsError(f"config sets {prefix}{name}={value!r}, a switch that was removed "
                                f"(docs/deviations.md); only {off!r} can be loaded")
    return raw
