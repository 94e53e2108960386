"""Guess What Moves (Choudhury et al., BMVC 2022) behind the benchmark protocol.

Letters: B batch, K masks, C the mask network's last width, H = W image side.

What it sees at test time: frame 0 alone. Motion (the generator's flow) is used only by the
training loss, so `uses_ground_truth = ()`: neither frame 1 nor any flow reaches `predict`,
and every record states it through the model config's `test_time_input`.

- masks and visible (B, K, H, W), the same maps: the network's softmax over its K masks, so
  they share every pixel. They are segments of the visible image (`amodal = False`): Table 1
  scores them against the visible truth. Mask k is one output channel, the same in every image;
  the metrics report both the fixed assignment and per-image matching.
- flow: None. The method predicts no flow from one frame (its flow model is fitted to a given
  flow, which test time does not have).
- features (B, K C): each mask's mean of the last decoder level's features (weighted by the
  mask), in mask order. Table 2 does not list the method.

baselines.gwm and torch are imported inside the functions so that `flowbench table` and
`flowbench list` start without loading torch.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.bench import Subject, cores, image_side, synthetic_pairs
from benchmark.errors import BenchmarkError
from benchmark.methods.glue import k_config, load_checkpoint, one_line, to_numpy
from benchmark.registry import (LOOP_BATCH, LOOP_ROWS, Axes, LoadedModel, LoopCase, Prediction,
                                TrainSpec, register)

TEST_TIME_INPUT = "frame 0 alone (flow is used only by the training loss)"


def _frame_tensor(model: Any, img0: np.ndarray):
    """img0 (B, 3, H, W) float in [0, 1] as a float32 tensor on the model's device;
    BenchmarkError when its side is not the model's."""
    import torch
    side = model.config.image_size
    if img0.ndim != 4 or img0.shape[1:] != (3, side, side):
        raise BenchmarkError(f"gwm expects images (B, 3, {side}, {side}), got {img0.shape}")
    dev = next(model.parameters()).device
    return torch.from_numpy(np.ascontiguousarray(img0, dtype=np.float32)).to(dev)


def _pooled(masks, feats):
    """masks (B, K, H, W), feats (B, C, H, W) -> each mask's weighted mean feature (B, K C)."""
    import torch
    sums = torch.einsum("bkhw,bchw->bkc", masks, feats)  # (B, K, C)
    return (sums / masks.sum((2, 3))[..., None].clamp_min(1e-6)).flatten(1)  # (B, K C)


@register
class GwmMethod:
    name = "gwm"
    title = "Guess What Moves"
    budgets = {"smoke": "6 steps of 8 pairs at 32 px: seconds",
               "quick": "16,000 steps of 8 pairs (128k): about 90 minutes of training on one "
                        "thread of a 2-core CPU (from a step's measured CPU time)",
               "long": "30,000 steps of 8 pairs (240k): about 2 hours 45 minutes of training "
                       "on one thread of a 2-core CPU (from a step's measured CPU time)",
               "gpu": "20,000 steps of 8 pairs (the official schedule) with a wider network: "
                      "an estimated 30 minutes on one GPU (not measured)"}
    uses_ground_truth = ()
    amodal = False
    tables = (1,)
    clip_frames = 2

    def _train_config(self, spec: TrainSpec):
        from baselines.gwm import GwmError, masks_for, profile
        # K, its number of masks, from the data's parts unless the ablation sets it
        return k_config("gwm", GwmError, profile, masks_for, spec)

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        return dataclasses.asdict(self._train_config(spec))

    def train(self, spec: TrainSpec) -> Path:
        from baselines.gwm import GwmError, train
        with one_line(GwmError, "gwm training"):
            return Path(train(self._train_config(spec), spec.data_root))

    def load(self, checkpoint: Path) -> LoadedModel:
        from baselines.gwm import GwmError
        from baselines.gwm import checkpoint as ckpt
        model, trained_with = load_checkpoint(ckpt, GwmError, "a gwm", checkpoint)
        m = model.config
        config = {**dataclasses.asdict(m), "test_time_input": TEST_TIME_INPUT}
        return LoadedModel(model=model, config=config, axes=Axes(num_capsules=m.num_masks),
                           image_size=m.image_size, trained_with=trained_with)

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        """img0 (B, 3, H, W) in [0, 1]; img1 and gt_flow are not used (one frame in)."""
        import torch
        frame = _frame_tensor(model, img0)
        with torch.inference_mode():
            out = model(frame)
            masks = to_numpy(out.masks.clamp(0.0, 1.0))  # (B, K, H, W)
            return Prediction(masks=masks, visible=masks, flow=None,
                              features=to_numpy(_pooled(out.masks, out.features)))

    def embed(self, model: Any, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        """Each mask's pooled features (B, K C) of img0."""
        import torch
        with torch.inference_mode():
            out = model(_frame_tensor(model, img0))
            return to_numpy(_pooled(out.masks, out.features))

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, None]:
        """Synthetic frames of the profile's side and random flow in pixels; no settings."""
        import torch
        from baselines.gwm import PROFILES
        from baselines.gwm.trainer import GwmTask
        cfg = PROFILES[profile].replace(model={"image_size": image_side(profile)})
        b, side = cfg.loop.batch_size, cfg.model.image_size
        frames = torch.from_numpy(synthetic_pairs(b, side)[:, 0])  # (B, H, W, 3)
        flow = 3 * torch.randn(b, side, side, 2, generator=torch.Generator().manual_seed(0))
        return Subject("gwm", GwmTask(cfg), (frames, flow), cfg.loop.threads or cores(),
                       cfg.loop.grad_clip), None

    def loop_case(self) -> LoopCase:
        from baselines.gwm import GwmError, ModelConfig, TrainConfig, trainer

        def config(out: Path, steps: int):
            model = ModelConfig(image_size=16, num_masks=3, widths=(4, 8), groups=2)
            return TrainConfig().replace(model=model, out=str(out), seed=1, device="cpu",
                                         threads=1, batch_size=LOOP_BATCH, steps=steps,
                                         warmup_steps=3, log_every=1, checkpoint_minutes=0.0)

        def fit(cfg, meta=None) -> Path:
            rng = np.random.default_rng(0)
            frames = rng.integers(0, 256, (LOOP_ROWS, 16, 16, 3), dtype=np.uint8)
            flow = rng.normal(0, 2, (LOOP_ROWS, 16, 16, 2)).astype(np.float16)
            return trainer.fit(cfg, frames, flow, progress=False, meta=meta)

        return LoopCase(trainer.GwmTask, config, fit, GwmError,
                        lambda c: c.replace(w_rec=0.5), "w_rec")
