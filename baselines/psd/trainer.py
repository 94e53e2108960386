"""PSD's trainer: stage 1 trains every latent dimension; at `stage1_fraction` of the steps the
active dimensions are chosen by their posterior KL (only those above `kl_active`, and with
`active_max_corr` < 1 no copy of a chosen one; with none, stage 1 goes on and the choice is
retried), the motion encoder is frozen and the structure is learned (stage 2); with `starts` > 1
stage 1 begins from the best of several short starts (baselines.psd.starts). At the end the
probe (baselines.psd.probe) scores the first training pairs. PSD's part of the shared training
loop (`trainloop`): its step, its stage switch, its finish.

Letters: N pairs, B batch, D latent dimensions, H = W image side.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import trainloop
from baselines.psd import checkpoint, starts
from baselines.psd.config import TrainConfig
from baselines.psd.data import load_train, load_visible, part_names
from baselines.psd.errors import PsdError
from baselines.psd.losses import LossTerms, kl_per_dim, psd_loss
from baselines.psd.model import PSD
from baselines.psd.probe import probe
from geogen.schema import SLOTS

CKPT_NAME, MODEL_NAME, LOG_NAME = trainloop.CKPT_NAME, trainloop.MODEL_NAME, trainloop.LOG_NAME
# The model as stage 1 left it (no dimension chosen), written at the switch: stage 2 can be
# redone from it with another choice without training stage 1 again.
STAGE1_NAME = "stage1.pt"
TERMS = ("flow", "kl", "structure", "local", "image")


def train(config: TrainConfig, data: str | Path, *, progress: bool = True) -> Path:
    """Train on a geogen dataset root (its train split); returns `out/model.pt`."""
    config.validate()
    frames, flow = load_train(data, config.max_pairs)
    visible = load_visible(data, min(config.probe_pairs, len(frames)))
    return fit(config, frames, flow, progress=progress, meta=_data_meta(data),
               visible=visible if len(visible) else None, parts=part_names(data))


def _data_meta(data: str | Path) -> dict[str, Any]:
    with trainloop.errors_as(PsdError):
        return trainloop.data_meta(data)


def batch_tensors(frames: torch.Tensor, flow: torch.Tensor, sel: torch.Tensor,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 frames (N, 2, H, W, 3) and float16 flow (N, H, W, 2) at `sel` -> frame 0, frame 1
    (B, 3, H, W) in [0, 1] and flow (B, 2, H, W) in pixels."""
    x = frames[sel].to(device).permute(0, 1, 4, 2, 3).float() / 255  # (B, 2, 3, H, W)
    f = flow[sel].to(device).float().permute(0, 3, 1, 2).contiguous()  # (B, 2, H, W)
    return x[:, 0].contiguous(), x[:, 1].contiguous(), f


@torch.no_grad()
def posterior_stats(model: PSD, flow: torch.Tensor, device: torch.device,
                    batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Mean posterior KL per latent dimension over the given flows (N, H, W, 2): (D,) nats; and
    the posterior means (N, D)."""
    was_training = model.training
    model.eval()
    total = torch.zeros(model.config.latent_dim, dtype=torch.float64)
    means = []
    for i in range(0, len(flow), batch):
        f = flow[i:i + batch].to(device).float().permute(0, 3, 1, 2)  # (b, 2, H, W)
        mean, log_var = model.encode(f)  # (b, D)
        total += kl_per_dim(mean, log_var).sum(0).double().cpu()
        means.append(mean.double().cpu())
    model.train(was_training)
    return (total / len(flow)).numpy(), torch.cat(means).numpy()


def choose_active(kl: np.ndarray, threshold: float, means: np.ndarray | None = None,
                  max_corr: float = 1.0) -> list[int]:
    """The dimensions whose mean KL (D,) exceeds `threshold` nats, largest KL first; none other,
    so a dead dimension is never a part (an empty list when stage 1 has learned nothing).

    With the posterior means (N, D) and `max_corr` < 1, a live dimension whose means correlate
    with an already chosen one's by more than `max_corr` in absolute value is left out: it codes
    the same motion (a copy with the opposite sign, say), and two such parts would be each
    other's parent in stage 2 rather than one the parent of the children.
    """
    order = [int(i) for i in np.argsort(-kl, kind="stable")]
    live = [i for i in order if kl[i] > threshold]
    if means is None or max_corr >= 1.0 or len(live) < 2:
        return live
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant mean copies nothing
        corr = np.corrcoef(means[:, live], rowvar=False)  # (L, L)
    corr = np.nan_to_num(np.abs(corr), nan=0.0)
    kept: list[int] = []  # positions in `live` chosen so far
    for a in range(len(live)):
        if all(corr[a, b] <= max_corr for b in kept):
            kept.append(a)
    return [live[a] for a in kept]


class PsdTask(trainloop.Task):
    """PSD's step in the shared loop; `flow` (N, H, W, 2) chooses the active dimensions."""

    name, unit, store, extra_fields = "psd", "pairs", checkpoint, ("stage",)

    def __init__(self, cfg: TrainConfig, frames: torch.Tensor, flow: torch.Tensor,
                 visible: np.ndarray | None = None, parts: tuple[str, ...] = SLOTS, *,
                 start_only: bool = False):
        self.config, self.frames, self.flow, self.visible = cfg, frames, flow, visible
        self.parts = parts
        # A start (baselines.psd.starts) runs the first steps of the whole run's schedule, and
        # ends in stage 1 with nothing exported but its weights.
        self.start_only = start_only

    def run_fraction(self, ctx: trainloop.StepContext) -> float:
        """How far the whole run is: its step over its step budget, in a start too (whose own
        loop's fraction is over the start's steps). Never the clock: the stage switch and the
        KL warm-up come at the same step on every machine."""
        return ctx.step / self.config.loop.steps

    @property
    def fresh_optimizer_each_phase(self) -> bool:  # the loop's phase is PSD's stage 2
        return self.config.stage2_fresh_optimizer

    def build(self, device: torch.device) -> PSD:
        self.device, self.model = device, PSD(self.config.model).to(device).train()
        return self.model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        others = [p for name, p in model.named_parameters() if not name.startswith("structure.")]
        return torch.optim.Adam([{"params": others, "lr": self.config.lr},
                                 {"params": list(model.structure.parameters()),
                                  "lr": self.config.structure_lr}])

    def _enter_stage2(self, model: PSD, state: dict[str, Any]) -> bool:
        """Choose the active dimensions; stage 2 starts only if some dimension is live."""
        kl, means = posterior_stats(model, self.flow[:self.config.active_pairs], self.device)
        state["kl"], state["kl_step"] = [round(float(v), 5) for v in kl], state["step"]
        active = choose_active(kl, self.config.kl_active, means, self.config.active_max_corr)
        if active:
            checkpoint.save(Path(self.config.loop.out) / STAGE1_NAME, self.config, model,
                            meta={"step": state["step"], "kl": state["kl"], "active_dims": active})
            model.set_active(active)
            state["stage2_step"] = state["step"]
        return bool(active)

    def before_step(self, model: nn.Module, ctx: trainloop.StepContext) -> bool:
        if model.stage2 or self.run_fraction(ctx) < self.config.stage1_fraction:
            return False
        last = ctx.state.get("kl_step")  # a choice that found no live dimension waits
        if last is not None and ctx.state["step"] - last < self.config.retry_steps:
            return False
        return self._enter_stage2(model, ctx.state)

    def step(self, loss_fn: nn.Module, rows: tuple[torch.Tensor, ...], gen: torch.Generator,
             ctx: trainloop.StepContext) -> trainloop.loop.Losses:
        img0, img1, flow_px = batch_tensors(rows[0], rows[1], slice(None), ctx.device)
        out = loss_fn(img0, flow_px, gen)
        terms: LossTerms = psd_loss(self.model, out, flow_px * self.config.model.flow_scale, img1,
                                    self.config,
                                    trainloop.ramp(self.run_fraction(ctx), self.config.kl_warmup))
        return terms.total, {t: getattr(terms, t) for t in TERMS}

    def log_values(self, model: nn.Module) -> dict[str, Any]:
        return {"stage": 2 if model.stage2 else 1}

    def finish(self, model: nn.Module, state: dict[str, Any]) -> dict[str, Any]:
        if self.start_only:
            return {}
        if not model.stage2:  # a budget too short for stage 2 still names its parts
            self._enter_stage2(model, state)
        weights = model.structure.weights(model.active).detach().cpu()
        active = model.active_dims()
        summary = {"active_dims": active,
                   "structure": [[round(float(weights[c, j]), 4) for j in active] for c in active]}
        if self.visible is not None:  # the probe on the first training pairs
            n = len(self.visible)
            summary["probe"] = probe(model, self.frames[:n, 0].numpy(),
                                     self.flow[:n].float().numpy(), self.visible,
                                     parts=self.parts)
        return summary


def fit(config: TrainConfig, frames: np.ndarray, flow: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None, visible: np.ndarray | None = None,
        parts: tuple[str, ...] = SLOTS) -> Path:
    """Train on in-memory pairs; resumes from `out/checkpoint.pt`; returns `out/model.pt`.

    frames (N, 2, H, W, 3) uint8, flow (N, H, W, 2) pixels frame 0 -> 1 (any float dtype);
    visible (n, H, W) the part labels of frame 0 of the first n pairs, for the probe, which
    names them by `parts` (label s + 1 is parts[s]; the data's manifest's slots).
    """
    cfg = config
    cfg.validate()
    size = cfg.model.image_size
    if frames.ndim != 5 or frames.shape[1:] != (2, size, size, 3) or frames.dtype != np.uint8:
        raise PsdError(f"frames must be uint8 (N, 2, {size}, {size}, 3), got "
                       f"{frames.dtype}{list(frames.shape)}")
    if flow.shape != (len(frames), size, size, 2):
        raise PsdError(f"flow must be (N={len(frames)}, {size}, {size}, 2), got {list(flow.shape)}")
    if visible is not None and (visible.shape[1:] != (size, size) or len(visible) > len(frames)):
        raise PsdError(f"visible must be (n <= {len(frames)}, {size}, {size}), got "
                       f"{list(visible.shape)}")
    if visible is not None and len(visible) and int(visible.max()) > len(parts):
        raise PsdError(f"visible names part {int(visible.max()) - 1}, but only {len(parts)} "
                       f"parts are named ({', '.join(parts)})")
    frames_t, flow_t = torch.from_numpy(frames), torch.from_numpy(flow)
    with trainloop.errors_as(PsdError):
        if cfg.starts > 1 and not (Path(cfg.loop.out) / CKPT_NAME).exists():
            starts.begin_with_best_start(
                cfg, lambda **kw: PsdTask(cfg, frames_t, flow_t, visible, parts, **kw),
                (frames_t, flow_t), progress=progress, meta=meta)
        return trainloop.fit(PsdTask(cfg, frames_t, flow_t, visible, parts), cfg.loop,
                             (frames_t, flow_t),
                             progress=progress, meta=meta)[1]
