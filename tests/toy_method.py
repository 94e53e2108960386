"""A toy method, whole: a model package (config, model, task, trainer) and its adapter in one
module, to show what a new method takes: this file and `register` (tests/test_toy_method.py).

Letters: B batch, K parts, H = W image side.

The model gives each pixel a softmax share over K parts from its colour (a 1x1 conv) and
redraws the image as the shares' mix of K learnt colours; the loss is the redrawn image's
squared error. It trains on frame 0 of the training pairs through the shared loop.

Loaded as a pytest plugin (`-p toy_method`) it registers the method for the whole session, so
that the suites parametrised over the registry collect it too.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import trainloop
from benchmark.bench import Subject, image_side, synthetic_pairs
from benchmark.methods.glue import checkpoint_file, one_line, refuse_axes, to_numpy
from benchmark.registry import (LOOP_BATCH, LOOP_ROWS, Axes, LoadedModel, LoopCase, Prediction,
                                TrainSpec, register, unregister)

NAME = "toyloop"
FORMAT = f"{NAME}-checkpoint-v1"  # trainloop.Task's default checkpoint format for the task
STEPS = {"smoke": 20, "quick": 200}  # training steps per profile


class ToyError(RuntimeError):
    """The package's one error class, which the loop's errors become."""


@dataclass(frozen=True)
class ToyConfig:
    out: str
    image_size: int = 32
    parts: int = 3  # K
    seed: int = 0
    steps: int = 20
    batch_size: int = 16
    lr: float = 0.05
    device: str = "cpu"
    threads: int = 1
    log_every: int = 5
    checkpoint_minutes: float = 0.0


class ColourParts(nn.Module):
    def __init__(self, parts: int):
        super().__init__()
        self.logits = nn.Conv2d(3, parts, 1)
        self.colours = nn.Parameter(torch.rand(parts, 3))  # (K, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, 3, H, W) in [0, 1] -> the shares (B, K, H, W) and the redrawn image."""
        shares = self.logits(x).softmax(1)  # (B, K, H, W)
        return shares, torch.einsum("bkhw,kc->bchw", shares, self.colours)  # (B, 3, H, W)


class ToyTask(trainloop.Task):
    name, unit = NAME, "images"

    def __init__(self, cfg: ToyConfig):
        self.config, self.lr = cfg, cfg.lr

    def build(self, device: torch.device) -> nn.Module:
        return ColourParts(self.config.parts).to(device)

    def step(self, loss_fn, rows, gen, ctx):
        x = rows[0].to(ctx.device).permute(0, 3, 1, 2).float() / 255.0  # (B, 3, H, W)
        _, redrawn = loss_fn(x)
        return F.mse_loss(redrawn, x), {}


def fit(cfg: ToyConfig, images: np.ndarray, meta: dict[str, Any] | None = None,
        task: type[ToyTask] = ToyTask) -> Path:
    """Train `task` on images (N, H, W, 3) uint8; the exported model's path."""
    loop = trainloop.LoopConfig(out=cfg.out, seed=cfg.seed, batch_size=cfg.batch_size,
                                steps=cfg.steps, device=cfg.device, threads=cfg.threads,
                                log_every=cfg.log_every,
                                checkpoint_minutes=cfg.checkpoint_minutes)
    with trainloop.errors_as(ToyError):
        _, path = trainloop.fit(task(cfg), loop, torch.from_numpy(images), progress=False,
                                meta=meta)
    return path


class ToyLoopMethod:
    """The adapter. Masks and visible: the shares (visible-only: `amodal = False`); features:
    each part's mean share of the image (B, K)."""

    name = NAME
    title = "Toy (colour parts, shared loop)"
    budgets = {"smoke": "seconds", "quick": "seconds (200 steps of a 1x1 conv)"}
    amodal = False
    task = ToyTask  # what it trains (a test's subclass may watch the steps)

    def _config(self, spec: TrainSpec) -> ToyConfig:
        refuse_axes(NAME, spec.variant)
        return ToyConfig(out=str(spec.run_dir), image_size=spec.image_size, seed=spec.seed,
                         steps=STEPS[spec.profile], device=spec.device)

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        return dataclasses.asdict(self._config(spec))

    def train(self, spec: TrainSpec) -> Path:
        from geogen.dataset import open_split
        from geogen.errors import GeogenError
        with one_line((GeogenError, ToyError), f"{NAME} training"):
            images = open_split(spec.data_root, "train").read(("frames",), t={"frames": 0})
            with trainloop.errors_as(ToyError):
                meta = trainloop.data_meta(spec.data_root)
            return fit(self._config(spec), images["frames"], meta,  # frames: (N, H, W, 3)
                       self.task)

    def load(self, checkpoint: Path) -> LoadedModel:
        with one_line(ToyError, f"cannot load {checkpoint} as a {NAME} checkpoint"):
            blob = trainloop.checkpoint.read_blob(checkpoint_file(checkpoint), FORMAT,
                                                  f"a {NAME}", ToyError)
        cfg = json.loads(blob["config"])
        model = ColourParts(cfg["parts"])
        model.load_state_dict(blob["model"])
        return LoadedModel(model=model.eval(), config=cfg, axes=Axes(),
                           image_size=cfg["image_size"])

    def predict(self, model: ColourParts, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        with torch.inference_mode():
            shares = to_numpy(model(torch.from_numpy(img0))[0])  # (B, K, H, W)
        return Prediction(masks=shares, visible=shares, flow=None,
                          features=shares.mean((2, 3)))

    def embed(self, model: ColourParts, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        return self.predict(model, img0, img0).features  # (B, K)

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, None]:
        cfg = ToyConfig(out="unused", image_size=image_side(profile))
        images = synthetic_pairs(cfg.batch_size, cfg.image_size)[:, 0].copy()  # (B, H, W, 3)
        return Subject(NAME, ToyTask(cfg), (torch.from_numpy(images),), cfg.threads, None), None

    def loop_case(self) -> LoopCase:
        def config(out: Path, steps: int) -> ToyConfig:
            return ToyConfig(out=str(out), image_size=8, steps=steps, batch_size=LOOP_BATCH,
                             log_every=1)

        def fit_fixed(cfg: ToyConfig, meta=None) -> Path:
            rng = np.random.default_rng(0)
            return fit(cfg, rng.integers(0, 256, (LOOP_ROWS, 8, 8, 3), dtype=np.uint8), meta)

        return LoopCase(ToyTask, config, fit_fixed, ToyError,
                        lambda c: dataclasses.replace(c, lr=0.5), "lr")


def pytest_configure(config) -> None:
    register(ToyLoopMethod)


def pytest_unconfigure(config) -> None:
    unregister(NAME)
