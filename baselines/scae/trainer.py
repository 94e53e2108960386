"""Training loop shared by SCAE and FlowSCAE: seeded, resumable, time- or step-budgeted.

Letters: N training samples, B batch.

The data is one in-memory tensor (N, ...) (images for SCAE, part capsules for FlowSCAE); each
epoch visits it in a permutation drawn from (seed, epoch), and each step's noise from
(seed, step), so a resumed run continues exactly where it stopped. `out/checkpoint.pt` is
written every `checkpoint_minutes` and at the end; `out/model.pt` is the exported model;
`out/log.csv` one row per `log_every` steps.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from baselines.scae import checkpoint
from baselines.scae.config import SCAEConfig
from baselines.scae.errors import ScaeError
from baselines.scae.model import build
from baselines.scae.optim import build as build_optimizer

CKPT_NAME, MODEL_NAME, LOG_NAME = "checkpoint.pt", "model.pt", "log.csv"
# Run fields that may change between an interrupted run and its resumption.
RESUMABLE = ("out", "device", "threads", "max_minutes", "max_steps", "log_every",
             "checkpoint_minutes")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(name)
    except RuntimeError:
        raise ScaeError(f"unknown device {name!r}") from None


def _check_resume(saved: SCAEConfig, cfg: SCAEConfig, path: Path) -> None:
    keep = {k: getattr(cfg.run, k) for k in RESUMABLE}
    if dataclasses.replace(saved, run=dataclasses.replace(saved.run, **keep)) != cfg:
        raise ScaeError(f"{path} was made with another config; use another output folder "
                        f"or remove it")


def _epsilon(cfg: SCAEConfig) -> float:
    # SCAE's choice: 1e-2 / batch_size^2 (the loss is a sum over the batch's mean)
    return cfg.optim.eps if cfg.optim.eps is not None else 1e-2 / cfg.run.batch_size ** 2


def fit(cfg: SCAEConfig, data: torch.Tensor, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train the model `cfg` describes on `data` (N, ...); returns `out/model.pt`."""
    cfg.validate()
    run = cfg.run
    n = len(data)
    if n < run.batch_size:
        raise ScaeError(f"{n} training samples are fewer than one batch of {run.batch_size}")
    device = resolve_device(run.device)
    if device.type == "cpu":
        torch.set_num_threads(run.threads or (os.cpu_count() or 1))
        torch.set_flush_denormal(True)  # flat-coloured images give tiny gradients
    out = Path(run.out)
    ckpt_path, model_path, log_path = out / CKPT_NAME, out / MODEL_NAME, out / LOG_NAME
    model = build(cfg).to(device)
    opt = build_optimizer(model.parameters(), cfg.optim.name, cfg.optim.lr, cfg.optim.decay,
                          cfg.optim.momentum, _epsilon(cfg))
    state: dict[str, Any] = {"step": 0, "train_seconds": 0.0, "samples": 0}
    if ckpt_path.exists():
        blob = checkpoint.read(ckpt_path)
        _check_resume(checkpoint.config_of(blob), cfg, ckpt_path)
        model.load_state_dict(blob["model"])
        opt.load_state_dict(blob["optimizer"])
        state.update(json.loads(blob["progress"]))
    meta = {**(meta or {}), "samples_total": n}
    steps_per_epoch = n // run.batch_size
    max_steps = run.max_steps or math.inf
    budget = run.max_minutes * 60 if run.max_minutes > 0 else math.inf

    def save_ckpt() -> None:
        checkpoint.save(ckpt_path, cfg, model, optimizer=opt, progress=state, meta=meta)

    out.mkdir(parents=True, exist_ok=True)
    by_steps = math.isfinite(max_steps)  # the bar follows the limit that binds
    bar = tqdm(total=int(max_steps) if by_steps else int(budget),
               initial=state["step"] if by_steps else int(state["train_seconds"]),
               unit="step" if by_steps else "s", desc=f"{cfg.kind} train", disable=not progress)
    log_file = open(log_path, "a", newline="")
    writer, header = csv.writer(log_file), log_path.stat().st_size > 0
    last_ckpt, window_t, window_n = time.monotonic(), time.monotonic(), 0
    stop_reason = "steps"
    model.train()
    try:
        while state["step"] < max_steps:
            if state["train_seconds"] >= budget:
                stop_reason = "time budget"
                break
            step = state["step"]
            epoch, pos = divmod(step, steps_per_epoch)
            perm = torch.randperm(n, generator=torch.Generator().manual_seed(
                run.seed * 100003 + epoch))
            sel = perm[pos * run.batch_size:(pos + 1) * run.batch_size]
            gen = torch.Generator(device=device).manual_seed(run.seed * 1000003 + step)
            t0 = time.monotonic()
            loss, terms = model.loss(data[sel].to(device), gen)
            value = float(loss.detach())
            if not math.isfinite(value):
                raise ScaeError(f"loss not finite at step {step}; stopped, the last good "
                                f"checkpoint is kept at {ckpt_path}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            dt = time.monotonic() - t0
            state["step"] = step + 1
            state["samples"] += len(sel)
            state["train_seconds"] += dt
            window_n += len(sel)
            if state["step"] % run.log_every == 0:
                rate = window_n / max(time.monotonic() - window_t, 1e-9)
                window_t, window_n = time.monotonic(), 0
                if not header:
                    writer.writerow(["step", "epoch", "samples", "seconds", "loss", *terms,
                                     "samples_per_s"])
                    header = True
                values = [f"{float(v.detach()):.6g}" for v in terms.values()]
                writer.writerow([state["step"], epoch, state["samples"],
                                 f"{state['train_seconds']:.1f}", f"{value:.6g}", *values,
                                 f"{rate:.1f}"])
                log_file.flush()
                bar.set_postfix(loss=f"{value:.4g}", per_s=f"{rate:.0f}")
            bar.update(1 if by_steps else int(state["train_seconds"]) - bar.n)
            if time.monotonic() - last_ckpt > run.checkpoint_minutes * 60:
                save_ckpt()
                last_ckpt = time.monotonic()
    except KeyboardInterrupt:
        save_ckpt()
        raise ScaeError(f"interrupted at step {state['step']}; the same command resumes "
                        f"(checkpoint {ckpt_path})") from None
    finally:
        bar.close()
        log_file.close()
    state["stop_reason"] = stop_reason
    save_ckpt()
    return checkpoint.save(model_path, cfg, model, meta={**meta, **state})
