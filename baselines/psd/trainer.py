"""PSD's trainer: stage 1 trains every latent dimension; at `stage1_fraction` of the budget the
active dimensions are chosen by their posterior KL, the motion encoder is frozen and the
structure is learned (stage 2). Resumable; seeded; stops on a NaN or exploding loss.

Letters: N pairs, B batch, D latent dimensions, H = W image side.
"""
from __future__ import annotations

import csv
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from baselines.psd import checkpoint
from baselines.psd.config import TrainConfig
from baselines.psd.data import load_train
from baselines.psd.errors import PsdError
from baselines.psd.losses import LossTerms, kl_per_dim, psd_loss
from baselines.psd.model import PSD
from flowcaps.trainer import resolve_device

CKPT_NAME = "checkpoint.pt"  # resumable state of the run
MODEL_NAME = "model.pt"  # exported weights + config + meta, what `train` returns
LOG_NAME = "log.csv"
TERMS = ("flow", "kl", "structure", "local", "image")
LOG_FIELDS = ("step", "stage", "pairs", "seconds", "loss", *TERMS, "pairs_per_s")


def train(config: TrainConfig, data: str | Path, *, progress: bool = True) -> Path:
    """Train on a geogen dataset root (its train split); returns `out/model.pt`."""
    config.validate()
    frames, flow = load_train(data, config.max_pairs)
    return fit(config, frames, flow, progress=progress, meta={"data": str(data)})


def batch_tensors(frames: torch.Tensor, flow: torch.Tensor, sel: torch.Tensor,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 frames (N, 2, H, W, 3) and float16 flow (N, H, W, 2) at `sel` -> frame 0, frame 1
    (B, 3, H, W) in [0, 1] and flow (B, 2, H, W) in pixels."""
    x = frames[sel].to(device).permute(0, 1, 4, 2, 3).float() / 255  # (B, 2, 3, H, W)
    f = flow[sel].to(device).float().permute(0, 3, 1, 2).contiguous()  # (B, 2, H, W)
    return x[:, 0].contiguous(), x[:, 1].contiguous(), f


@torch.no_grad()
def dimension_kl(model: PSD, flow: torch.Tensor, device: torch.device,
                 batch: int = 256) -> np.ndarray:
    """Mean posterior KL per latent dimension over the given flows (N, H, W, 2): (D,) nats."""
    was_training = model.training
    model.eval()
    total = torch.zeros(model.config.latent_dim, dtype=torch.float64)
    for i in range(0, len(flow), batch):
        f = flow[i:i + batch].to(device).float().permute(0, 3, 1, 2)  # (b, 2, H, W)
        mean, log_var = model.encode(f)  # (b, D)
        total += kl_per_dim(mean, log_var).sum(0).double().cpu()
    model.train(was_training)
    return (total / len(flow)).numpy()


def choose_active(kl: np.ndarray, threshold: float, minimum: int) -> list[int]:
    """Dimensions whose mean KL exceeds `threshold`, at least the `minimum` largest, by KL."""
    order = [int(i) for i in np.argsort(-kl, kind="stable")]
    above = [i for i in order if kl[i] > threshold]
    return above if len(above) >= minimum else order[:minimum]


def fit(config: TrainConfig, frames: np.ndarray, flow: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train on in-memory pairs; resumes from `out/checkpoint.pt`; returns `out/model.pt`.

    frames (N, 2, H, W, 3) uint8, flow (N, H, W, 2) pixels frame 0 -> 1 (any float dtype).
    """
    cfg = config
    cfg.validate()
    size = cfg.model.image_size
    if frames.ndim != 5 or frames.shape[1:] != (2, size, size, 3) or frames.dtype != np.uint8:
        raise PsdError(f"frames must be uint8 (N, 2, {size}, {size}, 3), got "
                       f"{frames.dtype}{list(frames.shape)}")
    if flow.shape != (len(frames), size, size, 2):
        raise PsdError(f"flow must be (N={len(frames)}, {size}, {size}, 2), got {list(flow.shape)}")
    if len(frames) < cfg.batch_size:
        raise PsdError(f"{len(frames)} pairs is fewer than one batch of {cfg.batch_size}")
    device = resolve_device(cfg.device, PsdError)
    if device.type == "cpu":
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.set_flush_denormal(True)  # flat images give tiny values; denormals are slow
    frames_t, flow_t = torch.from_numpy(frames), torch.from_numpy(flow)
    n = len(frames)
    steps_per_epoch = n // cfg.batch_size
    out = Path(cfg.out)
    ckpt_path, model_path = out / CKPT_NAME, out / MODEL_NAME

    torch.manual_seed(cfg.seed)  # the initial weights
    model = PSD(cfg.model).to(device).train()
    others = [p for name, p in model.named_parameters() if not name.startswith("structure.")]
    opt = torch.optim.Adam([{"params": others, "lr": cfg.lr},
                            {"params": list(model.structure.parameters()),
                             "lr": cfg.structure_lr}])
    state: dict[str, Any] = {"step": 0, "train_seconds": 0.0, "pairs": 0, "stage2_step": None,
                             "kl": None}
    if ckpt_path.exists():
        blob = checkpoint.read(ckpt_path)
        diff = checkpoint.config_of(blob).same_run(cfg)
        if diff:
            raise PsdError(f"{ckpt_path} was made with a different config (fields {diff}); "
                           f"use a new output folder or the same settings")
        checkpoint.load_weights(model, blob["model"], ckpt_path)
        if "optimizer" in blob:
            opt.load_state_dict(blob["optimizer"])
        state.update(checkpoint.meta_of(blob).get("progress", {}))
    meta = {**(meta or {}), "pairs_total": n}

    def save_ckpt() -> None:
        checkpoint.save(ckpt_path, cfg, model, optimizer=opt, meta={**meta, "progress": state})

    budget = cfg.max_minutes * 60 if cfg.max_minutes else math.inf
    fraction = lambda: max(state["step"] / cfg.steps, state["train_seconds"] / budget)  # noqa: E731

    def enter_stage2() -> None:
        kl = dimension_kl(model, flow_t[:cfg.active_pairs], device)  # (D,)
        model.set_active(choose_active(kl, cfg.kl_active, cfg.min_active))
        state["stage2_step"], state["kl"] = state["step"], [round(float(v), 5) for v in kl]

    out.mkdir(parents=True, exist_ok=True)
    new_log = not (out / LOG_NAME).exists()
    log_file = open(out / LOG_NAME, "a", newline="")
    writer = csv.writer(log_file)
    if new_log:
        writer.writerow(LOG_FIELDS)
    timed = cfg.max_minutes is not None
    bar = tqdm(total=round(budget) if timed else cfg.steps,
               initial=round(state["train_seconds"]) if timed else state["step"],
               disable=not progress, desc="psd train", unit="s" if timed else "step")
    recent: list[float] = []
    last_ckpt, window_t, window_pairs = time.monotonic(), time.monotonic(), 0
    stop_reason = "steps"
    before: list[torch.Tensor] = []
    perm, perm_epoch = torch.empty(0, dtype=torch.long), -1
    try:
        while state["step"] < cfg.steps:
            # Batch norm updates its statistics in the forward pass: an interrupted step puts
            # them back, so a resumed run repeats that step exactly.
            before = [b.clone() for b in model.buffers()]
            if state["train_seconds"] >= budget:
                stop_reason = "time budget"
                break
            if not model.stage2 and fraction() >= cfg.stage1_fraction:
                enter_stage2()
                recent = []  # the loss changes with the stage
                save_ckpt()
            step = state["step"]
            epoch = step // steps_per_epoch
            if perm_epoch != epoch:  # one order per (seed, epoch): a resumed run sees the same
                perm = torch.randperm(n, generator=torch.Generator().manual_seed(
                    cfg.seed * 100003 + epoch))
                perm_epoch = epoch
            pos = step % steps_per_epoch
            sel = perm[pos * cfg.batch_size:(pos + 1) * cfg.batch_size]
            gen = torch.Generator(device=device).manual_seed(cfg.seed * 1000003 + step)
            t0 = time.monotonic()
            img0, img1, flow_px = batch_tensors(frames_t, flow_t, sel, device)
            out_ = model(img0, flow_px, gen)
            terms: LossTerms = psd_loss(model, out_, flow_px * cfg.model.flow_scale, img1, cfg)
            loss = float(terms.total.detach())
            median = statistics.median(recent) if len(recent) >= 20 else math.inf
            if not math.isfinite(loss) or loss > cfg.explode_factor * median:
                what = "not finite" if not math.isfinite(loss) else f"exploded ({loss:.3g})"
                raise PsdError(f"loss {what} at step {step}; stopped, last good checkpoint "
                               f"kept at {ckpt_path}")
            opt.zero_grad(set_to_none=True)
            terms.total.backward()
            opt.step()
            recent = (recent + [loss])[-200:]
            dt = time.monotonic() - t0
            state["step"], state["pairs"] = step + 1, state["pairs"] + len(sel)
            state["train_seconds"] += dt
            window_pairs += len(sel)
            if state["step"] % cfg.log_every == 0 or state["step"] == cfg.steps:
                rate = window_pairs / max(time.monotonic() - window_t, 1e-9)
                window_t, window_pairs = time.monotonic(), 0
                vals = terms.floats()
                writer.writerow([state["step"], 2 if model.stage2 else 1, state["pairs"],
                                 f"{state['train_seconds']:.1f}", f"{loss:.5g}",
                                 *(f"{vals[t]:.5g}" for t in TERMS), f"{rate:.1f}"])
                log_file.flush()
                bar.set_postfix(loss=f"{loss:.4f}", stage=2 if model.stage2 else 1,
                                pairs_s=f"{rate:.0f}")
            bar.update(round(state["train_seconds"]) - bar.n if timed else 1)
            if time.monotonic() - last_ckpt > cfg.checkpoint_minutes * 60:
                save_ckpt()
                last_ckpt = time.monotonic()
    except KeyboardInterrupt:
        with torch.no_grad():
            for buf, old in zip(model.buffers(), before):
                buf.copy_(old)
        save_ckpt()
        raise PsdError(f"interrupted at step {state['step']}; resume with the same command "
                       f"(checkpoint {ckpt_path})") from None
    finally:
        bar.close()
        log_file.close()
    if not model.stage2:  # a budget too short for stage 2 still names its parts
        enter_stage2()
    state["stop_reason"] = stop_reason
    save_ckpt()
    weights = model.structure.weights(model.active).detach().cpu()
    active = model.active_dims()
    summary = {"active_dims": active,
               "structure": [[round(float(weights[c, j]), 4) for j in active] for c in active]}
    checkpoint.save(model_path, cfg, model, meta={**meta, **state, **summary})
    return model_path
