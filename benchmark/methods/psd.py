"""PSD (Xu et al., ICLR 2019) behind the benchmark protocol.

Letters: B batch, D latent dimensions, A active dimensions (PSD's parts), H = W image side.

What PSD sees at test time: frame 0 and the ground-truth flow from frame 0 to frame 1, which
its motion encoder turns into the latent (the posterior mean; no sampling). Frame 1 is not
used. So `uses_ground_truth = ("flow",)` and `predict`/`embed` refuse to run without
`gt_flow`; every record states it through the model config's `test_time_input`.

- masks and visible (B, A, H, W), the same maps: PSD's part masks, each active dimension's
  local motion magnitude over its own maximum in the image, in [0, 1]. The metrics threshold
  each at 1/2 on its own (the paper's rule: normalise, then threshold at 0.5). They are masks
  of what moves, i.e. of visible regions (`amodal = False`): Table 1 scores them against the
  visible truth and shows the ceiling in the amodal columns.
- A pixel covered by two dimensions (a parent's mask, which spans its children, and a
  child's; in the quick runs one dimension often moves two or three shapes and another one
  of them) is in both masks. The one-to-one assignment scores each slot against one
  dimension, so a union mask only wins a slot where it is the best one for it. Sharing such
  a pixel out between the dimensions would leave it in neither mask at 1/2.
- flow (B, 2, H, W): PSD's reconstruction of the flow (the sum of its per-part motions after
  the structure), in pixels, so EPE measures how well PSD reconstructs the flow it was given.
- features (B, D): the posterior mean of the motion encoder (all D dimensions).
- extras["motion"] (B, A, H, W): each active dimension's local motion magnitude over the
  largest one in the image, for the figure.

baselines.psd and torch are imported inside the functions so that `flowbench table` and
`flowbench list` start without loading torch.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.bench import Subject, cores, image_side, synthetic_pairs
from benchmark.errors import BenchmarkError
from benchmark.methods.glue import (gt_flow_tensor, load_checkpoint, one_line, refuse_axes,
                                    to_numpy)
from benchmark.registry import (LOOP_BATCH, LOOP_ROWS, Axes, LoadedModel, LoopCase, Prediction,
                                TrainSpec, register)

FLOW_USE = "its motion encoder reads it"
TEST_TIME_INPUT = "frame 0 and the ground-truth flow 0 -> 1 (motion encoder posterior mean)"
PROBE_PAIRS = 1000  # test pairs the record's probe scores (baselines.psd.probe)


@register
class PsdMethod:
    name = "psd"
    title = "PSD"
    budgets = {"smoke": "40 steps of 8 pairs at 32 px: a few seconds",
               "quick": "4,000 steps of 16 pairs (64k): about 22 minutes of training on one "
                        "thread of a 2-core CPU (30 with data and evaluation)",
               "long": "28,000 steps of 16 pairs (448k) after three starts of 1,120 steps, the "
                       "best trained on: about 160 minutes of training on one thread of a "
                       "2-core CPU (under 3 hours with evaluation; data made before)",
               "gpu": "13,000 steps of 32 pairs (416k): an estimated 15 minutes on one GPU "
                      "(not measured)"}
    uses_ground_truth = ("flow",)
    amodal = False
    tables = (1,)
    clip_frames = 2

    def _train_config(self, spec: TrainSpec):
        from baselines.psd import PROFILES, PsdError
        if spec.profile not in PROFILES:
            raise BenchmarkError(f"psd has no profile {spec.profile!r}; it has "
                                 f"{', '.join(sorted(PROFILES))}")
        refuse_axes("psd", spec.variant)
        with one_line(PsdError, "psd config"):
            cfg = PROFILES[spec.profile].replace(
                loop={"seed": spec.seed, "device": spec.device, "out": str(spec.run_dir)},
                model={"image_size": spec.image_size})
            cfg.validate()
        return cfg

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        return dataclasses.asdict(self._train_config(spec))

    def train(self, spec: TrainSpec) -> Path:
        import baselines.psd as psd
        with one_line(psd.PsdError, "psd training"):
            return Path(psd.train(self._train_config(spec), spec.data_root))

    def load(self, checkpoint: Path) -> LoadedModel:
        from baselines.psd import PsdError
        from baselines.psd import checkpoint as ckpt
        model, trained_with = load_checkpoint(ckpt, PsdError, "a psd", checkpoint)
        if not model.stage2:
            raise BenchmarkError(f"{checkpoint} has no active dimensions (not a finished run)")
        config = {**dataclasses.asdict(model.config), "active_dims": model.active_dims(),
                  "test_time_input": TEST_TIME_INPUT}
        return LoadedModel(model=model, config=config, axes=Axes(),
                           image_size=model.config.image_size, trained_with=trained_with)

    def record_extras(self, loaded: LoadedModel, data_root: Path) -> dict[str, Any]:
        """The PSD probe on the first test pairs: per-dimension KL, the part each active
        dimension moves and its mask IoU, the structure by parts; and the probe the training
        run wrote on its training pairs, when its checkpoint has one."""
        from baselines.psd.probe import probe
        from benchmark.datasets import read_checked, read_manifest_checked
        from geogen.schema import slots_of
        from geogen.scene import GEO_SCENE_VARIANTS, own_motions
        manifest = read_manifest_checked(data_root)
        config = manifest.get("config", {})
        # Geo's parts each move by one drawn number: say which one each dimension encodes.
        geo = (config.get("variant") in GEO_SCENE_VARIANTS
               and config.get("motion", "translation") == "translation")
        fields = ("frames", "flow", "visible") + (("pose", "present") if geo else ())
        test = read_checked(data_root, "test", fields, PROBE_PAIRS)
        found = probe(loaded.model, test["frames"][:, 0], test["flow"][:, 0], test["visible"][:, 0],
                      parts=slots_of(manifest),
                      motions=own_motions(test["pose"]) if geo else None,
                      present=test["present"] if geo else None)
        meta = (loaded.trained_with or {}).get("meta") or {}
        return {"psd_probe": {"test": found, "train": meta.get("probe")}}

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        """img0, img1 (B, 3, H, W) in [0, 1] (img1 unused); gt_flow (B, 2, H, W) pixels."""
        import torch
        flow = gt_flow_tensor("psd", FLOW_USE, model, gt_flow, img0.shape)
        dev = flow.device
        with torch.inference_mode():
            mean, _ = model.encode(flow)  # (B, D)
            local = model.local_motions(torch.from_numpy(img0).to(dev), mean)  # (B, 2, D, H, W)
            masks = model.masks(local[:, :, model.active])  # (B, A, H, W) PSD's part masks
            motion = model.structure(local, masks, model.active)  # (B, 2, D, H, W)
            recon = motion.sum(2) / model.config.flow_scale  # (B, 2, H, W) pixels
            mag = local[:, :, model.active].norm(dim=1)  # (B, A, H, W)
            top = mag.flatten(1).amax(-1).clamp_min(1e-12)  # (B,)
            parts = to_numpy(masks.clamp(0.0, 1.0))  # (B, A, H, W) each over its own maximum
            extras = {"motion": to_numpy(mag / top[:, None, None, None])}
        return Prediction(masks=parts, visible=parts, flow=to_numpy(recon), features=to_numpy(mean),
                          extras=extras)

    def embed(self, model: Any, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        """The posterior mean (B, D) of the flow; img0 only fixes the expected shape."""
        import torch
        flow = gt_flow_tensor("psd", FLOW_USE, model, gt_flow, img0.shape)
        with torch.inference_mode():
            mean, _ = model.encode(flow)  # (B, D)
        return to_numpy(mean)

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, None]:
        """Stage 1 (the motion encoder trains; stage 2 freezes it); no settings."""
        import torch
        from baselines.psd import PROFILES
        from baselines.psd.trainer import PsdTask
        cfg = PROFILES[profile].replace(model={"image_size": image_side(profile)})
        b, size = cfg.loop.batch_size, cfg.model.image_size
        frames = torch.from_numpy(synthetic_pairs(b, size))  # (B, 2, H, W, 3)
        flow = torch.randn(b, size, size, 2, generator=torch.Generator().manual_seed(0)).half()
        return Subject("psd", PsdTask(cfg, frames, flow), (frames, flow), cfg.loop.threads or cores(),
                       None), None

    def loop_case(self) -> LoopCase:
        from baselines.psd import PsdError, trainer
        from baselines.psd.config import ModelConfig, TrainConfig

        def config(out: Path, steps: int):
            model = ModelConfig(image_size=32, latent_dim=5, kernel_hidden=(8,), unet_width=4,
                                motion_scale=2, motion_kernels=(3,))
            return TrainConfig().replace(model=model, out=str(out), seed=1, device="cpu", threads=1,
                                         batch_size=LOOP_BATCH, steps=steps, stage1_fraction=0.5,
                                         active_pairs=8, kl_active=0.0, log_every=1,
                                         checkpoint_minutes=0.0)

        def fit(cfg, meta=None) -> Path:
            rng = np.random.default_rng(0)
            frames = rng.integers(0, 256, (LOOP_ROWS, 2, 32, 32, 3), dtype=np.uint8)
            flow = rng.normal(0, 2, (LOOP_ROWS, 32, 32, 2)).astype(np.float16)
            return trainer.fit(cfg, frames, flow, progress=False, meta=meta)

        return LoopCase(trainer.PsdTask, config, fit, PsdError,
                        lambda c: c.replace(w_local=0.5), "w_local")
