"""Motion Grouping (Yang et al., ICCV 2021) behind the benchmark protocol.

Letters: B batch, N rows of data, K slots, D slot size, H = W image side.

What it sees at test time: the ground-truth flow from frame 0 to frame 1, which is its whole
input (the official code feeds RAFT flow; there is no pretrained RAFT here). Neither frame is
used. So `uses_ground_truth = ("flow",)` and `predict`/`embed` refuse to run without
`gt_flow`; every record states it through the model config's `test_time_input`.

- masks and visible (B, K, H, W), the same maps: the slots' alphas, the decoder's softmax over
  slots, so they sum to 1 at every pixel. They are layers of the one visible flow (`amodal =
  False`): Table 1 scores them against the visible truth. The slots start from K learned
  vectors, so slot k means the same in every image; the metrics still report both the fixed
  assignment and per-image matching.
- flow (B, 2, H, W): the reconstruction, sum over slots of alpha x flow layer, in pixels, so
  EPE measures how well the autoencoder reproduces the flow it was given (a model that reads
  the colour coding, `input_form="rgb"`, has it decoded with the input's top speed).
- features (B, K D): the slots after the last iteration, in slot order.
- extras["layer"] (B, K, H, W): each slot's flow-layer speed over the largest in the image,
  for the figure.

baselines.motiongrouping and torch are imported inside the functions so that `flowbench table`
and `flowbench list` start without loading torch.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.bench import Subject, cores, image_side
from benchmark.methods.glue import gt_flow_tensor, k_config, load_checkpoint, one_line, to_numpy
from benchmark.registry import (LOOP_BATCH, LOOP_ROWS, Axes, LoadedModel, LoopCase, Prediction,
                                TrainSpec, register)

FLOW_USE = "it is the autoencoder's input"
TEST_TIME_INPUT = "the ground-truth flow 0 -> 1 (the autoencoder's only input)"


@register
class MotionGroupingMethod:
    name = "motiongrouping"
    title = "Motion Grouping"
    budgets = {"smoke": "6 steps of 8 flows at 32 px: seconds",
               "quick": "15,000 steps of 8 flows (120k): about 21 minutes of training on one "
                        "core of a 2-core CPU on Geo, 30 with data and evaluation (about 35 of "
                        "training with the articulated figures' 11 slots)",
               "gpu": "1,000 steps of 32 flows with the official network: an estimated 10 "
                      "minutes on one GPU (not measured)"}
    uses_ground_truth = ("flow",)
    amodal = False
    tables = (1,)
    clip_frames = 2

    def _train_config(self, spec: TrainSpec):
        from baselines.motiongrouping import MotionGroupingError, profile
        from baselines.motiongrouping.config import slots_for
        # K, its number of slots, from the data's parts unless the ablation sets it
        return k_config("motiongrouping", MotionGroupingError, profile, slots_for, spec)

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        return dataclasses.asdict(self._train_config(spec))

    def train(self, spec: TrainSpec) -> Path:
        from baselines.motiongrouping import MotionGroupingError, train
        with one_line(MotionGroupingError, "motiongrouping training"):
            return Path(train(self._train_config(spec), spec.data_root))

    def load(self, checkpoint: Path) -> LoadedModel:
        from baselines.motiongrouping import MotionGroupingError
        from baselines.motiongrouping import checkpoint as ckpt
        model, trained_with = load_checkpoint(ckpt, MotionGroupingError, "a motiongrouping",
                                              checkpoint)
        m = model.config
        config = {**dataclasses.asdict(m), "test_time_input": TEST_TIME_INPUT}
        return LoadedModel(model=model, config=config, axes=Axes(num_capsules=m.num_slots),
                           image_size=m.image_size, trained_with=trained_with)

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        """img0, img1 (B, 3, H, W) in [0, 1] (unused but for their shape); gt_flow (B, 2, H, W)
        pixels."""
        import torch
        flow = gt_flow_tensor("motiongrouping", FLOW_USE, model, gt_flow, img0.shape)
        with torch.inference_mode():
            out = model(flow)
            alphas = to_numpy(out.alphas.clamp(0.0, 1.0))  # (B, K, H, W)
            speed = out.layers.norm(dim=2)  # (B, K, H, W)
            top = speed.flatten(1).amax(-1).clamp_min(1e-12)  # (B,)
            extras = {"layer": to_numpy(speed / top[:, None, None, None])}
            return Prediction(masks=alphas, visible=alphas, flow=to_numpy(out.flow),
                              features=to_numpy(out.slots.flatten(1)), extras=extras)

    def embed(self, model: Any, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        """The slots (B, K D) of the flow; img0 only fixes the expected shape."""
        import torch
        flow = gt_flow_tensor("motiongrouping", FLOW_USE, model, gt_flow, img0.shape)
        with torch.inference_mode():
            slots = model.slots(flow)  # (B, K, D)
        return to_numpy(slots.flatten(1))

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, None]:
        """Its input is the generator's flow: synthetic flows of Geo's size, in pixels; no
        settings."""
        import torch
        from baselines.motiongrouping import PROFILES
        from baselines.motiongrouping.trainer import MotionGroupingTask
        cfg = PROFILES[profile].replace(model={"image_size": image_side(profile)})
        side = cfg.model.image_size
        gen = torch.Generator().manual_seed(0)
        flow = 3 * torch.randn(cfg.loop.batch_size, side, side, 2, generator=gen)  # (B, H, W, 2)
        # No clip: the official has none and neither has loop_config(cfg).
        return Subject("motiongrouping", MotionGroupingTask(cfg), (flow,),
                       cfg.loop.threads or cores(), None), None

    def loop_case(self) -> LoopCase:
        from baselines.motiongrouping import MotionGroupingError, ModelConfig, TrainConfig, trainer

        def config(out: Path, steps: int):
            model = ModelConfig(image_size=16, num_slots=3, iters=2, enc_channels=(4, 8),
                                dec_channels=4, kernel_size=3)
            return TrainConfig().replace(model=model, out=str(out), seed=1, device="cpu", threads=1,
                                         batch_size=LOOP_BATCH, steps=steps, warmup_steps=3, log_every=1,
                                         checkpoint_minutes=0.0)

        def fit(cfg, meta=None) -> Path:
            flow = np.random.default_rng(0).normal(0, 2, (LOOP_ROWS, 16, 16, 2))  # (N, H, W, 2)
            return trainer.fit(cfg, flow.astype(np.float16), progress=False, meta=meta)

        return LoopCase(trainer.MotionGroupingTask, config, fit, MotionGroupingError,
                        lambda c: c.replace(w_entropy=0.5), "w_entropy")
