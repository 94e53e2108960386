"""R-NEM behind the benchmark protocol.

Letters: B batch, N rows of data, T frames, K groups, S EM steps, D state size, H = W image side.

A test pair (img0, img1) is run as a 2-frame clip with the trained schedule (`schedule`): W
warm-up steps and E - 1 more on frame 0 against itself, then (0 -> 1), then (1 -> 1) x (E - 1)
(input frame -> target frame; R-NEM's E = 1 with W = 2 gives (0 -> 0) x 2, (0 -> 1)). Frame 0's
parts are read after its last step against itself (`read_step`), so they, and the features,
depend on img0 alone. R-NEM's groups are interchangeable, so every
per-group output is put in one order first: by each group's share of frame 0 (its sum of
gamma), largest first.
- masks and visible: gamma_k, the E-step's responsibilities for frame 0 (visible parts, so
  `amodal` is False). The E-step normalises them over the K groups and, with
  `background_group`, the fixed background group, whose share is not a part (they sum to 1
  minus its share at every pixel), and the metrics threshold each at 1/2 as given
  (the paper's rule: normalise, then threshold at 0.5). The decoder's own masks m_k, which may also
  cover what another group hides, scored lower in every probe (docs/baselines/rnem.md); they
  are in `extras["mask"]`.
- features: the K states theta_k at that step, concatenated in that order: K * D numbers.
- extras["gamma frame t"] for each frame t of the pair: gamma after the last step whose
  target is frame t, (B, K, H, W), in the order above; `flowbench show` draws one row each, so
  a group that follows its shape from frame to frame is seen in one column.
All maps are computed at the model's work side and resized bilinearly to the image side.
Gamma starts from one fixed random draw (seed 0) for every image, so inference is deterministic.

torch and the model are imported inside the functions so that `flowbench table` and `list`
start without loading torch.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.bench import Subject, cores
from benchmark.methods.glue import checkpoint_file, eval_device, one_line, refuse_axes, to_numpy
from benchmark.registry import (LOOP_BATCH, LOOP_ROWS, Axes, LoadedModel, LoopCase, Prediction,
                                TrainSpec, register)

EVAL_SEED = 0  # the start of gamma at inference, the same for every image


@register
class RnemMethod:
    name = "rnem"
    title = "R-NEM"
    tables = (1,)
    amodal = False  # `masks` are gamma, the visible parts
    uses_ground_truth: tuple[str, ...] = ()
    clip_frames = 10  # training clips: every profile's T
    budgets = {
        "smoke": "4 steps of 8 clips at 32 px: seconds",
        "quick": "at most 2,800 steps of 16 clips, fewer by early stopping: about 20 minutes of "
                 "training on one core of a 2-core CPU on Geo, 30 with clip data and "
                 "evaluation (more groups cost more: about an hour on the articulated figures)",
        "long": "at most 1,500 steps of 64 clips at 64 px: about 150 minutes of training on "
                "one CPU core, under 3 hours with clip data and evaluation",
        "gpu": "at most 20,000 steps of 64 clips, fewer by early stopping: an estimated hour "
               "on one GPU (not measured)",
    }

    def _train_config(self, spec: TrainSpec):
        from baselines.rnem import RnemError, profile
        from baselines.rnem.config import groups_for
        v = spec.variant
        refuse_axes("rnem", v, allowed=("num_capsules",))  # K: its number of groups
        with one_line(RnemError, "rnem config"):
            base = profile(spec.profile, str(spec.run_dir))
            work = min(base.model.work_size, spec.image_size)
            # K from the data's parts (its manifest's slots) unless the ablation sets it.
            k = (groups_for(len(spec.slots), base.model.background_group)
                 if v.num_capsules is None else v.num_capsules)
            model: dict[str, Any] = {"image_size": spec.image_size, "work_size": work,
                                     "num_groups": k}
            cfg = base.replace(loop={"seed": spec.seed, "device": spec.device}, model=model)
            cfg.validate()
        return cfg

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        return dataclasses.asdict(self._train_config(spec))

    def train(self, spec: TrainSpec) -> Path:
        from baselines.rnem import RnemError, train
        with one_line(RnemError, "rnem training"):
            return Path(train(self._train_config(spec), spec.data_root))

    def load(self, checkpoint: Path) -> LoadedModel:
        from baselines.rnem import RnemError
        from baselines.rnem import checkpoint as ckpt
        with one_line(RnemError, f"cannot load {checkpoint} as an rnem checkpoint"):
            blob = ckpt.read(checkpoint_file(checkpoint))
            model = ckpt.load(checkpoint, device=eval_device())
            trained_with = {"config": ckpt.config_of(blob).to_json(), "meta": ckpt.meta_of(blob)}
        m = model.config
        return LoadedModel(model=model, config=dataclasses.asdict(m),
                           axes=Axes(num_capsules=m.num_groups), image_size=m.image_size,
                           trained_with=trained_with)

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        import torch
        from baselines.rnem.model import read_step, schedule
        cfg = model.config
        with torch.inference_mode():
            x = torch.from_numpy(np.stack([img0, img1], 1)).to(_device(model))  # (B, 2, 3, H, W)
            states = model.run(model.to_work(x), _generator(), shared_init=True)
            read = states[read_step(cfg)]  # frame 0's last step against itself
            order = _order(read)  # (B, K)
            size = cfg.image_size
            visible = _resize(_take(read.gamma[:, :, 0], order), size)  # (B, K, H, W)
            last = {t_out: i for i, (_, t_out) in enumerate(
                schedule(2, cfg.em_steps, cfg.warmup))}  # frame -> its last step
            extras = {f"gamma frame {t}": _resize(_take(states[i].gamma[:, :, 0], order), size)
                      for t, i in sorted(last.items())}  # (B, K, H, W) each
            extras["mask"] = _resize(_take(read.mask[:, :, 0], order), size)
            return Prediction(masks=visible, visible=visible, flow=None,
                              features=to_numpy(_take(read.theta, order).flatten(1)), extras=extras)

    def embed(self, model: Any, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        import torch
        with torch.inference_mode():
            x = torch.from_numpy(img0[:, None]).to(_device(model))  # (B, 1, 3, H, W)
            # One frame: its steps against itself, the same as predict's first steps.
            read = model.run(model.to_work(x), _generator(), shared_init=True)[-1]
            return to_numpy(_take(read.theta, _order(read)).flatten(1))

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, None]:
        """Clips of the profile's T frames at its work side; no settings."""
        import torch
        from baselines.rnem import PROFILES
        from baselines.rnem.trainer import RnemTask
        cfg = PROFILES[profile]
        side, t = cfg.model.work_size, cfg.clip_frames
        clips = torch.randint(0, 256, (cfg.loop.batch_size, t, 3, side, side), dtype=torch.uint8,
                              generator=torch.Generator().manual_seed(0))  # (B, T, 3, H, W)
        return Subject("rnem", RnemTask(cfg), (clips,), cfg.loop.threads or cores(),
                       cfg.loop.grad_clip or None), None

    def loop_case(self) -> LoopCase:
        from baselines.rnem import ModelConfig, RnemError, TrainConfig, trainer

        def config(out: Path, steps: int):
            model = ModelConfig(image_size=16, work_size=16, enc_channels=(4, 8, 8),
                                enc_hidden=12, state_size=10, rel_hidden=8, att_hidden=6,
                                dec_hidden=12, em_steps=2)
            return TrainConfig().replace(model=model, out=str(out), clip_frames=3,
                                         batch_size=LOOP_BATCH, steps=steps, threads=1,
                                         log_every=1, device="cpu", checkpoint_minutes=0.0)

        def fit(cfg, meta=None) -> Path:
            shape = (LOOP_ROWS, 3, 3, 16, 16)  # (N, T, 3, H, W)
            clips = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
            return trainer.fit(cfg, clips, progress=False, meta=meta)

        return LoopCase(trainer.RnemTask, config, fit, RnemError,
                        lambda c: c.replace(lr=0.5), "lr")


def _device(model):
    return next(model.parameters()).device


def _generator():
    import torch
    return torch.Generator().manual_seed(EVAL_SEED)


def _order(state):
    """(B, K) group indices, largest share of the image (sum of gamma) first."""
    import torch
    share = state.gamma.flatten(2).sum(-1)  # (B, K)
    return torch.argsort(share, dim=1, descending=True, stable=True)


def _take(t, order):
    """t (B, K, ...) with its groups in `order` (B, K)."""
    import torch
    idx = order.view(*order.shape, *([1] * (t.dim() - 2))).expand_as(t)
    return torch.gather(t, 1, idx)


def _resize(maps, size: int) -> np.ndarray:
    """(B, N, h, w) -> float32 numpy (B, N, size, size), bilinear, clipped to [0, 1]."""
    from torch.nn import functional as F
    if maps.shape[-1] != size:
        maps = F.interpolate(maps, size=(size, size), mode="bilinear", align_corners=False)
    return to_numpy(maps.clamp(0, 1))
