"""One training loop for every method: seeds, batch order, the budget, the learning-rate
schedule, the loss guard, the CSV log, periodic atomic checkpoints, one resume rule, Ctrl-C, the
progress bar and DDP.

A method brings a `Task` (its model, optimiser and step, plus optional hooks); the loop owns the
rest, the way a LightningModule supplies its training step and the Trainer owns the loop.

Letters: N rows of training data (pairs, clips or samples, the task's `unit`), B batch.

Randomness: the initial weights come from `seed`; epoch e visits this rank's rows in a
permutation drawn from (seed, rank, e) and step s gets a generator seeded from (seed, rank, s),
so a resumed run repeats exactly what an uninterrupted one does.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from trainloop import ddp, lock
from trainloop.checkpoint import meta_of, progress_of, read_blob, write_blob
from trainloop.data import check_same_data
from trainloop.device import resolve_device, setup_cpu
from trainloop.errors import LoopError, TimeGuardStop, TrainingInterrupted
from trainloop.log import Log
from trainloop.progress import run_fraction, training_bar
from trainloop.seeds import MAX_SEED

CKPT_NAME = "checkpoint.pt"  # the run's resumable state
MODEL_NAME = "model.pt"  # the exported model: what a training returns
BEST_NAME = "best.pt"  # the weights of the best validation loss so far (early stopping)
LOG_NAME = "log.csv"
# Config fields a resumed run may change, at any depth of a method's config: where it runs, how
# it reports, where its folder lies, its budget (a run may be given more steps) and its guard.
RESUMABLE = frozenset({"out", "device", "threads", "cpu_ranks", "log_every", "checkpoint_minutes",
                       "max_minutes", "epochs", "steps", "rows"})
Losses = tuple[torch.Tensor, dict[str, torch.Tensor]]  # the total, and the terms the log names


@dataclass(frozen=True)
class LoopConfig:
    """The loop's settings: every method's config holds one as its `loop` field (one place for
    the budget, seed, batch, guard, device, bookkeeping and early stopping)."""

    out: str  # the run folder
    seed: int
    batch_size: int  # per rank
    # The budget, one of three: `rows` of data seen over all ranks (pairs, clips or samples:
    # the task's unit), else `steps`, else `epochs` passes over the data. Every schedule is a
    # function of the step alone, so a budget trains the same on every machine.
    rows: int | None = None
    steps: int | None = None
    epochs: int | None = None
    # A guard, not a budget: past this many minutes of training the run saves its checkpoint
    # and stops with an error (a stopped run is no result; a larger guard resumes it).
    max_minutes: float | None = None
    device: str = "auto"
    threads: int = 0  # CPU threads; 0: the cores shared among the ranks
    grad_clip: float | None = None  # max gradient norm; None: none
    explode_factor: float | None = 50.0  # stop when the loss exceeds this times its recent median
    log_every: int = 20
    checkpoint_minutes: float = 2.0
    # Early stopping: every `eval_every` steps the task's `validation_loss` is computed; the
    # run stops after `patience` evaluations without a new best and exports the best weights.
    eval_every: int | None = None  # None: no validation
    patience: int | None = None  # None: validate (and keep the best weights) but never stop

    def validate(self) -> None:
        if not str(self.out).strip():  # an unset variable: it would write into the working folder
            raise LoopError("the run folder (out) is empty; name a folder")
        if not 0 <= self.seed <= MAX_SEED:
            raise LoopError(f"seed must be in 0..{MAX_SEED}, got {self.seed}")
        if self.rows is None and self.steps is None and self.epochs is None:
            raise LoopError("a run needs a budget: rows (pairs), steps or epochs; minutes are "
                            "only a guard")
        if any(v is not None and v < 1 for v in (self.rows, self.steps, self.epochs)):
            raise LoopError("the budget (rows, steps, epochs) must be >= 1")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise LoopError(f"max_minutes (the time guard) must be > 0, got {self.max_minutes}")
        if self.batch_size < 1 or self.log_every < 1:
            raise LoopError("batch_size and log_every must be >= 1")
        if (self.eval_every is not None and self.eval_every < 1) or (
                self.patience is not None and self.patience < 1):
            raise LoopError("eval_every and patience must be >= 1 (or None)")


@dataclass(frozen=True)
class StepContext:
    step: int
    epoch: int
    fraction: float  # how far the run is: step / the budget's steps (never the clock)
    rank: int
    world: int
    rows: int  # how many rows of data this rank has
    device: torch.device
    state: dict[str, Any]  # the run's progress (saved in checkpoints); a task may add keys


class Task:
    """A method's part of a training run. A subclass defines `build` (its model) and `step`
    (its losses); the optimiser (Adam at `lr`), the checkpoint file and every hook have
    defaults."""

    name = "train"  # the progress bar's label
    unit = "pairs"  # what one row of the data is; the log's and the progress' count
    extra_fields: tuple[str, ...] = ()  # the task's own log columns (`log_values`)

    lr = 1e-3  # the default optimiser's learning rate
    config: Any = None  # the method's config (a dataclass): what checkpoints store
    # A new phase (`before_step` True) starts the optimiser afresh (its moments and step
    # counts cleared; the learning rates kept), as a separate training stage would.
    fresh_optimizer_each_phase = False

    # --- what every method defines ---
    def build(self, device: torch.device) -> nn.Module:
        """The model, on `device`; the loop has seeded torch's RNG with the run's seed."""
        raise NotImplementedError

    def step(self, loss_fn: nn.Module, rows: tuple[torch.Tensor, ...], gen: torch.Generator,
             ctx: StepContext) -> Losses:
        """The losses of one batch: the total and its named terms (the log's columns, in the
        order of the first step's dict). `rows` are the data's tensors at the batch's rows, and
        `loss_fn` is `loss_module`'s module (wrapped for DDP when there are ranks)."""
        raise NotImplementedError

    # --- checkpoints: a method's own module (`store`), or the loop's file format ---
    store: Any = None  # a module with save(path, config, model, **kw), read(path), config_of(blob)

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.lr)

    def save(self, path: Path, model: nn.Module, **kw: Any) -> Path:
        """kw: optimizer, progress, meta."""
        if self.store is not None:
            return self.store.save(path, self.config, model, **kw)
        config = json.dumps(dataclasses.asdict(self.config) if self.config is not None else {})
        return write_blob(path, f"{self.name}-checkpoint-v1", config, model, **kw)

    def read(self, path: Path) -> dict[str, Any]:
        """A checkpoint's raw dict; the method's one-line error for a bad file."""
        if self.store is not None:
            return self.store.read(path)
        return read_blob(path, f"{self.name}-checkpoint-v1", f"a {self.name}", LoopError)

    def load_weights(self, model: nn.Module, blob: dict[str, Any], path: Path) -> None:
        # a model's own loader (one that accepts the keys of older checkpoints) where it has one
        getattr(model, "load_weights", model.load_state_dict)(blob["model"])

    def config_dict(self, blob: dict[str, Any] | None = None) -> dict[str, Any]:
        """The run's config as a (nested) dict, or, given a checkpoint, the config it holds:
        the resume rule compares the two."""
        if blob is None:
            return dataclasses.asdict(self.config) if self.config is not None else {}
        if self.store is not None:
            return dataclasses.asdict(self.store.config_of(blob))
        return json.loads(blob["config"])

    # --- hooks ---
    def loss_module(self, model: nn.Module, world: int) -> nn.Module:
        """The module whose forward the step calls: what DDP wraps and what a method may
        compile. Default: the model itself."""
        return model

    def start(self, model: nn.Module, saved_meta: dict[str, Any] | None) -> dict[str, Any]:
        """Called once the model exists (and, on a resume, holds the checkpoint's weights;
        `saved_meta` is then the checkpoint's meta, else None): meta to record."""
        return {}

    def lr_factor(self, step: int, fraction: float) -> float | None:
        """The schedule: each group's learning rate is its initial one times this; None leaves
        the optimiser's rates alone."""
        return None

    def select(self, sel: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        """The batch's rows of this rank's data (default: the epoch's permutation, in order)."""
        return sel

    def before_step(self, model: nn.Module, ctx: StepContext) -> bool:
        """Called before each step; True when a new phase begins (the loss guard's history is
        cleared, the optimiser's state too if `fresh_optimizer_each_phase`, and a checkpoint is
        written)."""
        return False

    def log_values(self, model: nn.Module) -> dict[str, Any]:
        """Values for `extra_fields` in the current log row."""
        return {}

    def validation_loss(self, model: nn.Module, device: torch.device) -> float | None:
        """The loss on held-out data (lower is better), with gradients off and the model in
        eval mode; None: the task has no validation data (no early stopping)."""
        return None

    def finish(self, model: nn.Module, state: dict[str, Any]) -> dict[str, Any]:
        """Called after the last step: meta for the exported model (a summary of what it
        learned)."""
        return {}


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_difference(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The fields (dotted) in which two configs differ, leaving out those a resume may change."""
    a, b = _flat(json.loads(json.dumps(saved))), _flat(json.loads(json.dumps(current)))
    return sorted(k for k in a.keys() | b.keys()
                  if k.rsplit(".", 1)[-1] not in RESUMABLE and a.get(k) != b.get(k))


def check_resume(task: Task, path: Path, current: dict[str, Any] | None = None,
                 data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run checkpoint at `path`, read, if the run may resume from it (see RESUMABLE) on
    the data `data` names (meta with DATA and DATA_HASH, trainloop.data); a LoopError naming
    the fields or both datasets otherwise. `current`: the config to compare (the task's own by
    default)."""
    blob = task.read(path)
    diff = config_difference(task.config_dict(blob), current or task.config_dict())
    if diff:
        raise LoopError(f"{path} was made with a different config (fields {diff}); use a new "
                        f"output folder or the same settings")
    if "progress" not in blob:
        raise LoopError(f"{path} holds no training progress; use a new output folder")
    check_same_data(Path(path).parent, meta_of(blob), data or {})
    return blob


def fit(task: Task, cfg: LoopConfig, data: torch.Tensor | Sequence[torch.Tensor], *,
        progress: bool = True, meta: dict[str, Any] | None = None,
        rank_part: bool = False) -> tuple[nn.Module, Path]:
    """Train `task` on `data` (one tensor or several, N rows each); resumes from
    `out/checkpoint.pt`. Returns this rank's trained model and `out/model.pt`.

    Under DDP (torchrun's WORLD_SIZE > 1) each rank trains on an equal contiguous part of the
    rows, unless `rank_part` says `data` already is this rank's part.
    """
    cfg.validate()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # the launcher that started the ranks holds it
        return _fit(task, cfg, data, progress=progress, meta=meta, rank_part=rank_part)
    with lock.hold(Path(cfg.out)):
        return _fit(task, cfg, data, progress=progress, meta=meta, rank_part=rank_part)


def _fit(task: Task, cfg: LoopConfig, data: torch.Tensor | Sequence[torch.Tensor], *,
         progress: bool, meta: dict[str, Any] | None, rank_part: bool) -> tuple[nn.Module, Path]:
    device = ddp.rank_device(resolve_device(cfg.device))  # cuda:LOCAL_RANK under torchrun
    rank, world = ddp.setup(device)
    if world > 1:
        ddp.defer_interrupts()
        _check_same_settings(task, world)
    if device.type == "cpu":
        setup_cpu(cfg.threads, world)
    tensors = tuple(data) if isinstance(data, (tuple, list)) else (data,)
    local = len(tensors[0]) if rank_part else len(tensors[0]) // world
    if local < cfg.batch_size:
        raise LoopError(f"{local} {task.unit} on each of {world} rank(s) is fewer than one batch "
                        f"of {cfg.batch_size}")
    if not rank_part:
        tensors = tuple(t[rank * local:(rank + 1) * local] for t in tensors)
    if device.type == "cuda" and sum(t.nbytes for t in tensors) < torch.cuda.mem_get_info(device)[0] // 4:
        tensors = tuple(t.to(device) for t in tensors)  # on the GPU: no host copy per step
    steps_per_epoch = local // cfg.batch_size
    total_steps = budget_steps(cfg, steps_per_epoch, world)
    out = Path(cfg.out)
    ckpt_path, model_path, best_path = out / CKPT_NAME, out / MODEL_NAME, out / BEST_NAME

    torch.manual_seed(cfg.seed)  # the initial weights: identical on every rank
    model = task.build(device)
    opt = task.optimizer(model)
    base_lrs = [g["lr"] for g in opt.param_groups]  # before a resume restores scaled ones
    unit = task.unit
    state: dict[str, Any] = {"step": 0, "train_seconds": 0.0, unit: 0}
    saved_meta = None
    if ckpt_path.exists():
        blob = check_resume(task, ckpt_path, data=meta)
        task.load_weights(model, blob, ckpt_path)
        if "optimizer" in blob:
            opt.load_state_dict(blob["optimizer"])
        state.update(progress_of(blob))
        saved_meta = meta_of(blob)
    start_step = state["step"]  # the log keeps no row past it (a killed run's rows go)
    meta = {**(meta or {}), **task.start(model, saved_meta), f"{unit}_total": local * world,
            "world_size": world}
    loss_fn = task.loss_module(model, world)
    if world > 1:
        loss_fn = nn.parallel.DistributedDataParallel(loss_fn)

    def write(path: Path, **kw: Any) -> None:
        try:
            task.save(path, model, **kw)
        except OSError as err:  # a full disk: the file there before is intact
            kept = (f"the last good checkpoint kept at {ckpt_path}" if ckpt_path.exists()
                    else "no checkpoint was written yet")
            raise LoopError(f"cannot write {path} ({err.strerror or err}); stopped at step "
                            f"{state['step']}, {kept}") from None

    def save_ckpt() -> None:
        if rank == 0:
            write(ckpt_path, optimizer=opt, progress=state, meta=meta)

    guard = cfg.max_minutes * 60 if cfg.max_minutes else math.inf
    log: Log | None = None  # opened at the first row, whose terms name its columns
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    bar = training_bar(total_steps, state, disable=not progress or rank != 0,
                       desc=f"{task.name} train")
    recent: list[float] = []
    buffers: list[torch.Tensor] = []
    # One process: SIGTERM (a scheduler's, `kill`) saves and stops as Ctrl-C does; ranks defer
    # both signals to the step's end (ddp.defer_interrupts).
    restore_term = ddp.terminate_as_interrupt() if world == 1 else None
    last_ckpt = time.monotonic()
    window_t, window_rows = time.monotonic(), 0
    stop_reason = ("rows" if cfg.rows is not None else "steps" if cfg.steps is not None
                   else "epochs")
    perm, perm_epoch = torch.empty(0, dtype=torch.long), -1
    ddp.mark_loop(True)  # ddp.request_stop now reaches this loop
    try:
        while state["step"] < total_steps:
            if state["train_seconds"] >= guard:  # the same step on every rank (agreed below)
                save_ckpt()
                ddp.barrier(world)
                raise TimeGuardStop(ckpt_path, state["step"], total_steps, cfg.max_minutes)
            if cfg.patience is not None and state.get("val_bad", 0) >= cfg.patience:
                stop_reason = "early stopping"  # a resumed run that had already stopped
                break
            # Batch norm updates its statistics in the forward pass: an interrupted step puts
            # them back, so a resumed run repeats that step exactly.
            buffers = [b.clone() for b in model.buffers()]
            step = state["step"]
            epoch = step // steps_per_epoch
            frac = run_fraction(step, total_steps)
            ctx = StepContext(step, epoch, frac, rank, world, local, device, state)
            if task.before_step(model, ctx):
                recent = []  # the loss changes with the phase
                if task.fresh_optimizer_each_phase:
                    opt.state.clear()
                save_ckpt()
            if perm_epoch != epoch:  # one permutation per (seed, rank, epoch)
                perm = torch.randperm(local, generator=torch.Generator().manual_seed(
                    cfg.seed * 100003 + rank * 7919 + epoch))
                perm_epoch = epoch
            pos = step % steps_per_epoch
            sel = task.select(perm[pos * cfg.batch_size:(pos + 1) * cfg.batch_size], ctx)
            # On a GPU the step's random draws happen there.
            gen = torch.Generator(device=device).manual_seed(cfg.seed * 1000003 + rank * 10007 + step)
            t0 = time.monotonic()
            factor = task.lr_factor(step, frac)
            if factor is not None:
                for group, lr0 in zip(opt.param_groups, base_lrs):
                    group["lr"] = lr0 * factor
            total, terms = task.step(loss_fn, tuple(t[sel] for t in tensors), gen, ctx)
            loss = ddp.agree([float(total.detach())], world, device)[0]  # every rank alike
            median = statistics.median(recent) if len(recent) >= 20 else math.inf
            exploded = cfg.explode_factor is not None and loss > cfg.explode_factor * median
            if not math.isfinite(loss) or exploded:
                what = "not finite" if not math.isfinite(loss) else f"exploded ({loss:.3g})"
                kept = (f"last good checkpoint kept at {ckpt_path}" if ckpt_path.exists()
                        else "no checkpoint was written yet")
                raise LoopError(f"loss {what} at step {step}; stopped, {kept}")
            opt.zero_grad(set_to_none=True)
            total.backward()
            if cfg.grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            recent = (recent + [loss])[-200:]
            state["step"] = step + 1
            state[unit] += len(sel) * world
            # The ranks' clocks differ (rank 0 also logs), so they add the mean step time and
            # stop at the same step; a rank left alone in a collective would hang.
            seconds, stopping = ddp.agree([time.monotonic() - t0, float(ddp.stop_requested())],
                                          world, device)
            state["train_seconds"] += seconds
            window_rows += len(sel) * world
            early = bool(cfg.eval_every) and state["step"] % cfg.eval_every == 0 and _early_stop(
                task, model, cfg, state, device, world, best_path, rank, meta)
            if rank == 0 and (state["step"] % cfg.log_every == 0 or state["step"] == total_steps):
                if log is None:
                    log = Log(out / LOG_NAME, ("step", "epoch", unit, "seconds", "lr", "loss",
                                               *terms, *task.extra_fields, f"{unit}_per_s",
                                               *(("val_loss",) if cfg.eval_every else ())),
                              upto=start_step)
                rate = window_rows / max(time.monotonic() - window_t, 1e-9)
                window_t, window_rows = time.monotonic(), 0
                lr = opt.param_groups[0]["lr"]
                log.row({"step": state["step"], "epoch": epoch, unit: state[unit],
                         "seconds": f"{state['train_seconds']:.1f}", "lr": f"{lr:.3g}",
                         "loss": f"{loss:.6g}",
                         **{n: f"{float(v.detach()):.6g}" for n, v in terms.items()},
                         **task.log_values(model), f"{unit}_per_s": f"{rate:.1f}",
                         "val_loss": f"{state['val_loss']:.6g}" if "val_loss" in state else ""})
                bar.set_postfix({"step": state["step"], "loss": f"{loss:.4g}",
                                 f"{unit}/s": f"{rate:.0f}"})
            bar.update(1)
            if time.monotonic() - last_ckpt > cfg.checkpoint_minutes * 60:
                save_ckpt()
                last_ckpt = time.monotonic()
            if stopping:  # a rank's SIGINT, seen by all of them at this step
                save_ckpt()
                ddp.barrier(world)  # the checkpoint is on disk before any rank reports
                raise TrainingInterrupted(ckpt_path, state["step"])
            if early:
                stop_reason = "early stopping"
                break
    except KeyboardInterrupt:
        with torch.no_grad():
            for buf, old in zip(model.buffers(), buffers):
                buf.copy_(old)
        save_ckpt()
        raise TrainingInterrupted(ckpt_path, state["step"]) from None
    finally:
        ddp.mark_loop(False)
        if restore_term is not None:
            restore_term()
        bar.close()
        if log is not None:
            log.close()
    summary = task.finish(model, state)
    state["stop_reason"] = stop_reason
    save_ckpt()  # the last weights: a resume with a larger budget continues from them
    if state.get("val_best_step") is not None and best_path.exists():
        # With validation the export holds the weights of the best validation loss (R-NEM's
        # rule), not the last ones.
        task.load_weights(model, task.read(best_path), best_path)
    if rank == 0:
        write(model_path, meta={**meta, **state, **summary})
    ddp.barrier(world)
    return model, model_path


def _check_same_settings(task: Task, world: int) -> None:
    """Every rank trains one config: nodes started with different settings (each node's
    launcher writes its own ranks' config) are refused before the first step, on every rank."""
    texts = ddp.gather_texts(json.dumps(task.config_dict(), sort_keys=True), world)
    if len(set(texts)) > 1:
        first, other = (_flat(json.loads(t)) for t in (texts[0], next(t for t in texts if t != texts[0])))
        fields = sorted(k for k in first.keys() | other.keys() if first.get(k) != other.get(k))
        raise LoopError(f"the ranks were started with different settings (fields {fields}); "
                        f"start every node with the same command")


def budget_steps(cfg: LoopConfig, steps_per_epoch: int, world: int) -> int:
    """The run's steps: its rows over the global batch (rounded up), else its steps, else its
    epochs' steps. A function of the config and the data alone, never of the machine's speed."""
    if cfg.rows is not None:
        return -(-cfg.rows // (cfg.batch_size * world))
    if cfg.steps is not None:
        return cfg.steps
    return steps_per_epoch * cfg.epochs


def _early_stop(task: Task, model: nn.Module, cfg: LoopConfig, state: dict[str, Any],
                device: torch.device, world: int, best_path: Path, rank: int,
                meta: dict[str, Any]) -> bool:
    """One validation: a new best is kept in `best_path`; True when `patience` evaluations in
    a row brought none. The counts live in `state`, so a resumed run keeps them."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        value = task.validation_loss(model, device)
    model.train(was_training)
    if value is None:
        return False
    value = ddp.agree([float(value)], world, device)[0]  # every rank decides alike
    state["val_loss"] = value
    best = state.get("val_best")
    if best is None or value < best:
        state.update(val_best=value, val_best_step=state["step"], val_bad=0)
        if rank == 0:
            task.save(best_path, model, meta={**meta, **state})
        return False
    state["val_bad"] = state.get("val_bad", 0) + 1
    return cfg.patience is not None and state["val_bad"] >= cfg.patience
