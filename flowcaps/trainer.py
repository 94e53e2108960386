"""The self-supervised trainer: frame pairs only, no flow or masks. FlowCapsules' part of the
shared training loop (`trainloop`): its step, its schedule and its data mixing.

Letters: N pairs, B batch, T frames, H, W image side.

Under torchrun (WORLD_SIZE > 1) each rank trains on its own contiguous part of the pairs with
DistributedDataParallel (gloo on CPU, nccl on CUDA); rank 0 alone writes files.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import trainloop
from trainloop import ddp
from flowcaps import checkpoint, kernel_cache, launch, memory
from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError, TrainingInterrupted
from flowcaps.losses import LossTerms, pair_loss
from flowcaps.model import FlowCapsules
from trainloop.rendezvous import Rendezvous

CKPT_NAME, MODEL_NAME, LOG_NAME = trainloop.CKPT_NAME, trainloop.MODEL_NAME, trainloop.LOG_NAME
# One column per loss term after the total (render, smooth, centre, ...), in LossTerms' order.
TERM_FIELDS = tuple(f.name for f in dataclasses.fields(LossTerms) if f.name != "total")


class _LossModule(nn.Module):
    """Wraps the loss so DistributedDataParallel sees one forward per step."""

    def __init__(self, model: FlowCapsules, cfg: TrainConfig):
        super().__init__()
        self.model = model
        self.config = cfg

    def forward(self, img0: torch.Tensor, img1: torch.Tensor, gen: torch.Generator,
                center_scale: torch.Tensor) -> LossTerms:
        return pair_loss(self.model, img0, img1, self.config, gen, center_scale)


def resolve_device(name: str) -> torch.device:
    return trainloop.resolve_device(name, FlowcapsError)


def _split_shards(root: Path, split: str) -> tuple[dict, list]:
    """A dataset's manifest and its split's (shard path, count) list, or a one-line error."""
    from geogen.dataset import open_split
    from geogen.errors import GeogenError

    try:
        part = open_split(root, split)
    except GeogenError as err:
        raise FlowcapsError(f"cannot read {split} split of {root}: {err}") from None
    return part.manifest, list(part.shards)


def _check_size(size: int, cfg: TrainConfig) -> None:
    if size != cfg.model.image_size:
        raise FlowcapsError(f"data is {size} px but model.image_size is {cfg.model.image_size}")


def _check_batch(local: int, world: int, batch: int) -> None:
    if local < batch:
        raise FlowcapsError(f"{local} pairs on each of {world} rank(s) is fewer than one batch "
                            f"of {batch}")


def _preflight(config: TrainConfig, root: Path, ranks: int) -> None:
    """The checks `run` makes on the data, made once before starting the ranks."""
    local = 0
    for r in _roots(config, root):
        manifest, parts = _split_shards(r, "train")
        _check_size(int(manifest.get("size", -1)), config)
        clips = sum(c for _, c in parts)
        clips = clips if config.max_pairs is None else min(clips, config.max_pairs)  # as load_pairs
        local += clips // ranks * max(int(manifest.get("frames", 2)) - 1, 1)
    _check_batch(local, ranks, config.loop.batch_size // ranks)


def _roots(config: TrainConfig, data: Path) -> list[Path]:
    """The dataset folders a run trains on: DATA, then `mix_data` if set."""
    return [data] + ([Path(config.mix_data)] if config.mix_data else [])


def load_pairs(root: str | Path, split: str = "train", limit: int | None = None,
               rank: int = 0, world: int = 1) -> np.ndarray:
    """Frames (N, 2, H, W, 3) uint8: this rank's contiguous part of the first `limit` clips.

    Each of `world` ranks gets limit // world clips (the remainder is dropped so every rank runs
    the same number of steps) and reads only its rows of the shards. A clip of T > 2 frames
    gives T - 1 pairs.
    """
    from geogen.dataset import open_split, pairs  # geogen is only needed when reading a dataset
    from geogen.errors import GeogenError

    root = Path(root)
    try:
        clips = open_split(root, split).read(("frames",), limit, rank=rank, world=world)
        if not len(clips["frames"]):
            raise FlowcapsError(f"{root} has no {split} clips for rank {rank} of {world}")
        return pairs(clips["frames"])  # (N, T, H, W, 3) -> (N * (T - 1), 2, H, W, 3)
    except GeogenError as err:  # a bad folder, request or shard: one line for the user
        raise FlowcapsError(f"cannot read {split} split of {root}: {err}") from None


def to_images(batch: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 (B, 2, H, W, 3) -> two float (B, 3, H, W) in [0, 1]."""
    x = batch.to(device).permute(0, 1, 4, 2, 3).float() / 255  # (B, 2, 3, H, W)
    return x[:, 0].contiguous(), x[:, 1].contiguous()


def _lr_factor(cfg: TrainConfig, step: int, progress: float) -> float:
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "cosine":
        # Cosine decay to 2% over the run; `progress` is the step's fraction of the budget.
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return 1.0


def _fade(progress: float, span: float) -> float:
    """1 at the start, falling linearly to 0 at `span` of the run (prior_anneal)."""
    return max(0.0, 1.0 - progress / span)


def _init_blob(cfg: TrainConfig) -> dict[str, Any]:
    """`cfg.init`'s checkpoint, or a one-line error if it is missing, foreign or of another model."""
    blob = checkpoint.read(cfg.init)
    saved = checkpoint.config_of(blob).model
    if saved != cfg.model:
        diff = sorted(k for k, v in saved.__dict__.items() if v != getattr(cfg.model, k))
        raise FlowcapsError(f"init checkpoint {cfg.init} has another model config (fields {diff})")
    return blob


def _load_init(model: FlowCapsules, cfg: TrainConfig) -> dict[str, Any]:
    """Load `cfg.init`'s weights into `model`; returns what the run's meta records of it."""
    blob = _init_blob(cfg)
    model.load_weights(blob["model"])
    digest = hashlib.sha256(Path(cfg.init).read_bytes()).hexdigest()
    return {"path": str(cfg.init), "sha256": digest, "meta": checkpoint.meta_of(blob)}


def mix_batch(mix_from: int, local: int, batch: int, seed: int) -> torch.Tensor:
    """A batch drawn (with replacement) from rows [mix_from, local): mix_data's pairs only."""
    return mix_from + torch.randint(local - mix_from, (batch,),
                                    generator=torch.Generator().manual_seed(seed))  # (batch,)


class FlowcapsTask(trainloop.Task):
    """FlowCapsules' step in the shared loop. `mix_from`: where this rank's part of `mix_data`'s
    pairs starts (`train` puts them last), for `mix_first`."""

    name, unit, store = "flowcaps", "pairs", checkpoint

    def __init__(self, cfg: TrainConfig, mix_from: int | None = None):
        self.config, self.mix_from = cfg, mix_from
        self.model: FlowCapsules | None = None

    def build(self, device: torch.device) -> FlowCapsules:
        self.model = FlowCapsules(self.config.model).to(device)
        return self.model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.config.lr)

    def loss_module(self, model: nn.Module, world: int) -> nn.Module:
        fn: nn.Module = _LossModule(model, self.config)
        if self.config.compile:
            # Compile the loss, not the DDP wrapper around it: DDP's forward (a profiler
            # record_function) then stays eager, and dynamo still splits the graph at DDP's buckets.
            fn = kernel_cache.compiled(fn)
            if world > 1:
                ddp.match_compiled_grad_layout(model)
        return fn

    def start(self, model: nn.Module, saved_meta: dict[str, Any] | None) -> dict[str, Any]:
        if saved_meta is not None:  # a resumed run keeps what it started from
            init = saved_meta.get("init")
        else:
            init = _load_init(model, self.config) if self.config.init else None
        return {**({"init": init} if init else {}), "bf16": self.config.bf16}

    def lr_factor(self, step: int, fraction: float) -> float:
        return _lr_factor(self.config, step, fraction)

    def select(self, sel: torch.Tensor, ctx: trainloop.StepContext) -> torch.Tensor:
        if ctx.fraction < self.config.mix_first and self.mix_from is not None:
            return mix_batch(self.mix_from, ctx.rows, len(sel),
                             self.config.loop.seed * 100003 + ctx.rank * 7919 + ctx.step)
        return sel

    def step(self, loss_fn: nn.Module, rows: tuple[torch.Tensor, ...], gen: torch.Generator,
             ctx: trainloop.StepContext) -> trainloop.loop.Losses:
        cfg = self.config
        img0, img1 = to_images(rows[0], ctx.device)
        center_scale = trainloop.ramp(ctx.fraction, cfg.center_warmup)
        if cfg.prior_anneal > 0 and hasattr(self.model.encoder, "prior_gain"):
            self.model.encoder.prior_gain.fill_(_fade(ctx.fraction, cfg.prior_anneal))
        # A tensor, not a float: torch.compile would specialise (recompile) on every value.
        terms = loss_fn(img0, img1, gen, torch.tensor(center_scale, device=ctx.device))
        return terms.total, {n: getattr(terms, n) for n in TERM_FIELDS}


# What a run folder holds that `force` removes: the run's own files, never the user's others.
RUN_FILES = (CKPT_NAME, MODEL_NAME, LOG_NAME, launch.LAUNCH_CONFIG)


def _check_run_folder(cfg: TrainConfig, ranks: int, data: dict[str, Any]) -> None:
    """The run folder: usable, and any checkpoint there one this run can resume on `data`
    (its meta: trainloop.data_meta)."""
    from geogen.errors import GeogenError
    from geogen.outpath import check_output_folder
    out = Path(cfg.loop.out)
    if out.exists() and not out.is_dir():
        raise FlowcapsError(f"--out {out} exists and is not a folder")
    try:
        check_output_folder(out, "--out")
    except GeogenError as err:
        raise FlowcapsError(str(err)) from None
    ckpt_path = out / CKPT_NAME
    if ckpt_path.exists():  # the ranks store their own config (launch.per_rank_config)
        rank_cfg = launch.per_rank_config(cfg, ranks) if ranks > 1 else cfg
        with trainloop.errors_as(FlowcapsError):
            trainloop.check_resume(FlowcapsTask(cfg), ckpt_path, dataclasses.asdict(rank_cfg),
                                   data)
    elif cfg.init:
        _init_blob(cfg)


def _data_meta(config: TrainConfig, data: Path) -> dict[str, Any]:
    with trainloop.errors_as(FlowcapsError):
        return trainloop.data_meta(*_roots(config, data))


def _clear_run_folder(out: Path) -> None:
    """`force`: the run's files go, so it trains afresh."""
    for name in RUN_FILES:
        try:
            (out / name).unlink(missing_ok=True)
        except OSError as err:
            raise FlowcapsError(f"--force cannot remove {out / name}: {err.strerror}") from None


def train(config: TrainConfig, data: str | Path, *, progress: bool = True,
          force: bool = False, rendezvous: Rendezvous = Rendezvous()) -> Path:
    """Train from a geogen dataset root; returns the exported model path (`out/model.pt`).
    A run folder holding a checkpoint resumes (on the same data and settings only); `force`
    removes the run's files first and trains afresh. `rendezvous`: where the nodes of a
    multi-node training meet (one node by default).

    Every setting, the data, the run folder and `init` are checked before training starts
    (and before the ranks start, when there are several)."""
    config.validate()
    memory.check(config)  # the machine's side of the config: a step that cannot fit is refused
    with trainloop.errors_as(FlowcapsError):
        rendezvous.validate()
    ranks = launch.ranks_for(config, resolve_device(config.loop.device), rendezvous)
    world = ranks * rendezvous.nnodes
    if world > config.loop.batch_size:
        raise FlowcapsError(f"batch_size {config.loop.batch_size} is the global batch: it needs at "
                            f"least one pair for each of the {world} ranks")
    if "RANK" not in os.environ:  # the launcher checked these before it started the ranks
        for root in _roots(config, Path(data)):  # the data, and the data mixed in
            if not (root / "manifest.json").is_file():
                raise FlowcapsError(f"{root} is not a geogen dataset (no manifest.json)")
            manifest, _ = _split_shards(root, "train")
            if int(manifest.get("size", -1)) != config.model.image_size:
                raise FlowcapsError(f"{root} holds {manifest.get('size')} px pairs but the model "
                                    f"is {config.model.image_size} px (model.image_size)")
        if config.mix_data and Path(config.mix_data).resolve() == Path(data).resolve():
            raise FlowcapsError(f"--mix-data {config.mix_data} is DATA itself: every pair would "
                                f"train twice; name another dataset (geo+ mixes in geo)")
        if force and Path(config.loop.out).is_dir():
            _clear_run_folder(Path(config.loop.out))
        _check_run_folder(config, world, _data_meta(config, Path(data)))
    if world > 1:
        _preflight(config, Path(data), world)
        return launch.launch(config, data, ranks, progress, rendezvous)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    parts = [load_pairs(r, "train", config.max_pairs, rank, world) for r in _roots(config, Path(data))]
    pairs = parts[0] if len(parts) == 1 else np.concatenate(parts)  # (N_rank, 2, H, W, 3)
    return run(config, pairs, progress=progress, meta=_data_meta(config, Path(data)),
               rank_part=True, mix_from=len(parts[0]) if len(parts) > 1 else None)[1]


def fit(config: TrainConfig, pairs: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None) -> Path:
    """Train on in-memory pairs (N, 2, H, W, 3) uint8; resumes from `out/checkpoint.pt`."""
    if config.mix_data is not None:
        raise FlowcapsError("mix_data is read by train(config, DATA); fit trains on its pairs only")
    return run(config, pairs, progress=progress, meta=meta)[1]


def run(config: TrainConfig, pairs: np.ndarray, *, progress: bool = True,
        meta: dict[str, Any] | None = None, rank_part: bool = False,
        mix_from: int | None = None) -> tuple[FlowCapsules, Path]:
    """`fit`, also returning this rank's trained model (every rank has one under DDP).

    Under DDP `pairs` is split into equal contiguous parts by rank, unless `rank_part` says it
    already is this rank's part (as `train` reads it). `mix_from`: where this rank's part of
    `mix_data`'s pairs starts (`train` puts them last), for `mix_first`.
    """
    config.validate()
    if pairs.ndim != 5 or pairs.shape[1] != 2 or pairs.dtype != np.uint8:
        raise FlowcapsError(f"pairs must be uint8 (N, 2, H, W, 3), got {pairs.dtype}{list(pairs.shape)}")
    _check_size(pairs.shape[2], config)
    _check_size(pairs.shape[3], config)
    task = FlowcapsTask(config, mix_from)
    with trainloop.errors_as(FlowcapsError, TrainingInterrupted):
        return trainloop.fit(task, config.loop, torch.from_numpy(pairs),
                             progress=progress, meta=meta, rank_part=rank_part)
