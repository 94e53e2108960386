"""Typed configs of the Motion Grouping model and its trainer, their JSON round trip, and the
profiles.

Settings taken from the official code (charigyang/motiongrouping, `src/model.py`,
`src/train.py`, `src/config.py`) keep its numbers; every change is argued in
docs/baselines/motiongrouping.md. A checkpoint stores `TrainConfig.to_json()`, so `load`
rebuilds the exact model and a resumed run can check that nothing changed.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from baselines.motiongrouping.errors import MotionGroupingError
from trainloop.configs import build, json_object, nest_loop, replaced
from trainloop.loop import LoopConfig

DEVICES = ("cpu", "cuda", "auto")
INPUT_FORMS = ("uv", "rgb")
UPSAMPLINGS = 3  # the decoder's stride-2 transposed convs: slots are broadcast to side / 8


@dataclass(frozen=True)
class ModelConfig:
    """The network (the official `SlotAttentionAutoEncoder` unless noted)."""

    image_size: int = 64  # official: 128 x 224; the benchmark's data is 64 px
    num_slots: int = 4  # K; official 2 (foreground, background); Geo: three shapes + background
    # (`slots_for`)
    iters: int = 5  # Slot Attention iterations
    # Encoder stages: two k x k convs each (instance norm + ReLU), a 2x2 max-pool between
    # stages; the last width is the slot size D.
    enc_channels: tuple[int, ...] = (64, 128, 256)
    dec_channels: int = 64  # the broadcast decoder's width
    kernel_size: int = 5  # every conv of the encoder, and of the decoder unless ...
    # ... dec_kernel_size is given (None: kernel_size). The stride-2 transposed convs turn a
    # broadcast slot mostly into a pattern that repeats with each broadcast cell; with 3x3
    # kernels that pattern dominates, and at 64 px the alphas tile the image by position
    # instead of following the motion (docs/baselines/motiongrouping.md, 64 px).
    dec_kernel_size: int | None = None
    # The decoder stops at work_size / decoder_scale and its layers and alpha logits are
    # upsampled bilinearly to the image (official: 1, full size); 2 is the CPU profile's saving.
    decoder_scale: int = 1
    # The network works at image_size / work_scale: the flow is average-pooled to that side on
    # the way in (its unit stays the image's) and the decoder's outputs are upsampled to the
    # image (official: 1). At 2 a pair costs about a quarter, so a CPU budget sees more steps.
    work_scale: int = 1
    attn_eps: float = 1e-8  # added to the attention before its weighted mean over inputs
    # The network reads and writes flow in units of flow_unit x image_size pixels, and the
    # reconstruction loss is taken in those units (official: pixels, None). In pixels the
    # decoder's layers start ~10x smaller than Geo's motion and every alpha stays at 1/K
    # through a CPU budget (docs/baselines/motiongrouping.md, flow unit).
    flow_unit: float | None = 0.1
    # What the network reads and reconstructs: "uv", the two flow components in flow_unit
    # (the official's argparse default); "rgb", the flow's colour coding in [-1, 1]
    # (`flowcode`; the official README trains and evaluates with `--flow_to_rgb`).
    input_form: str = "uv"

    @property
    def channels(self) -> int:
        """Channels of the network's input and of each slot's reconstructed layer."""
        return 2 if self.input_form == "uv" else 3

    @property
    def slot_size(self) -> int:
        return self.enc_channels[-1]

    @property
    def work_size(self) -> int:
        """The side the encoder and the decoder work at."""
        return self.image_size // self.work_scale

    @property
    def decoder_kernel(self) -> int:
        return self.kernel_size if self.dec_kernel_size is None else self.dec_kernel_size

    @property
    def unit_pixels(self) -> float:
        """Pixels per unit of the network's flow."""
        return 1.0 if self.flow_unit is None else self.flow_unit * self.image_size

    def validate(self) -> None:
        if self.work_scale not in (1, 2, 4) or self.image_size % self.work_scale:
            raise MotionGroupingError(f"work_scale must be 1, 2 or 4 and divide image_size "
                                      f"{self.image_size}, got {self.work_scale}")
        side, step = self.work_size, 2 ** UPSAMPLINGS
        pooled = 2 ** (len(self.enc_channels) - 1)
        if side < 2 * step or side % step or side % pooled:
            raise MotionGroupingError(f"image_size / work_scale must be a multiple of {step} and "
                                      f"of {pooled} (the encoder's pooling), >= {2 * step}; got "
                                      f"{side}")
        if self.num_slots < 1 or self.iters < 1:
            raise MotionGroupingError(f"num_slots and iters must be >= 1, got {self.num_slots}, "
                                      f"{self.iters}")
        if not self.enc_channels or min(self.enc_channels) < 1 or self.dec_channels < 1:
            raise MotionGroupingError("enc_channels must be non-empty and every width >= 1")
        if self.decoder_scale not in (1, 2, 4):
            raise MotionGroupingError(f"decoder_scale must be 1, 2 or 4, got {self.decoder_scale}")
        for name in ("kernel_size", "dec_kernel_size"):
            k = getattr(self, name)
            if k is not None and (not isinstance(k, int) or k < 1 or k % 2 == 0):
                raise MotionGroupingError(f"{name} must be odd, got {k}")
        if not 0 < self.attn_eps < 1:
            raise MotionGroupingError(f"attn_eps must be in (0, 1), got {self.attn_eps}")
        if self.input_form not in INPUT_FORMS:
            raise MotionGroupingError(f"input_form must be one of {', '.join(INPUT_FORMS)}, "
                                      f"got {self.input_form!r}")
        if self.flow_unit is not None and not (math.isfinite(self.flow_unit)
                                               and self.flow_unit > 0):
            raise MotionGroupingError(f"flow_unit must be > 0 (or None: pixels), got "
                                      f"{self.flow_unit}")


@dataclass(frozen=True)
class TrainConfig:
    """The trainer (the official `train.py` unless noted)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    # The shared loop's settings: the budget in `loop.steps` of `loop.batch_size` flows,
    # `loop.max_minutes` only a guard (past it the run saves its checkpoint and stops with an
    # error, exporting no model).
    loop: LoopConfig = field(default_factory=lambda: LOOP)
    lr: float = 5e-4
    warmup_steps: int = 200  # linear warm-up of the learning rate
    decay_steps: int = 80_000  # every this many steps the rate is multiplied by decay_rate ...
    decay_rate: float = 0.5
    weight_growth: float = 5.0  # ... and the entropy weight by this (official: ent_scale * 5)
    w_recon: float = 100.0  # official loss_scale: 1e2 x the mean squared flow error (flow units)
    w_entropy: float = 0.01  # official ent_scale
    entropy_eps: float = 1e-5  # inside the log of the entropy term
    max_pairs: int | None = None  # train on the first pairs only (None: all)

    def validate(self) -> None:
        self.model.validate()
        loop = self.loop
        if loop.device not in DEVICES:
            raise MotionGroupingError(f"device must be one of {', '.join(DEVICES)}, got "
                                      f"{loop.device!r}")
        if loop.batch_size < 1 or loop.steps is None or loop.steps < 1 or loop.log_every < 1:
            raise MotionGroupingError(f"batch_size, steps and log_every must be >= 1, got "
                                      f"{loop.batch_size}, {loop.steps}, {loop.log_every}")
        if loop.max_minutes is not None and not loop.max_minutes > 0:
            raise MotionGroupingError(f"max_minutes (a guard) must be > 0 or None, got "
                                      f"{loop.max_minutes}")
        if self.warmup_steps < 0 or self.decay_steps < 1:
            raise MotionGroupingError(f"warmup_steps must be >= 0 and decay_steps >= 1, got "
                                      f"{self.warmup_steps}, {self.decay_steps}")
        for name in ("lr", "decay_rate", "weight_growth", "w_recon", "w_entropy", "entropy_eps"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise MotionGroupingError(f"{name} must be finite and >= 0, got {value}")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise MotionGroupingError(f"max_pairs must be >= 1, got {self.max_pairs}")
        if loop.explode_factor is not None and loop.explode_factor <= 1:
            raise MotionGroupingError(f"explode_factor must be > 1, got {loop.explode_factor}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        raw = json_object(text, MotionGroupingError)
        raw = nest_loop(raw, LOOP)  # older configs: the loop's settings flat
        return build(cls, raw, MotionGroupingError)

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed; `model` and `loop` may be dicts of their fields'
        changes, and a loop field may be named alone (`seed`)."""
        return replaced(self, changes, MotionGroupingError)


# The shared loop's settings of the official training: 32 flows a step (official: 32 samples
# of two flows each); 1,000,000 steps (official: 5e9, i.e. none) is a ceiling profiles lower.
LOOP = LoopConfig(out="runs/motiongrouping", seed=0, batch_size=32, steps=1_000_000,
                  explode_factor=50.0, log_every=20, checkpoint_minutes=2.0)


# What the official README trains on (`--flow_to_rgb`); the dataclass keeps "uv", its argparse
# default, so a checkpoint written before input_form existed still loads as what it was.
OFFICIAL_INPUT = "rgb"

# The quick profile: 15,000 steps of 8 (120k pairs), about 21 minutes of training on one thread
# of a 2-core CPU (so two runs share the machine; 30 minutes wall with data and evaluation).
# The official widths cost about a second a pair here; the narrower network and the encoder's
# 3x3 kernels are what fit (docs/baselines/motiongrouping.md, speed). The decoder keeps the
# official 5x5 kernels: with 3x3 the alphas tile the image by position at 64 px, and 5x5 costs
# about a tenth more a step. A CPU's minutes are short of steps: batch 8 and the network at half
# the side (work_scale 2) give about eleven times the steps of batch 32 at the full side in
# equal time (docs/baselines/motiongrouping.md, the budget).
QUICK = TrainConfig(loop=dataclasses.replace(LOOP, out="runs/motiongrouping-quick", threads=1,
                                            steps=15_000, batch_size=8),
                    model=ModelConfig(enc_channels=(32, 64, 64), dec_channels=32, kernel_size=3,
                                      dec_kernel_size=5, decoder_scale=2, work_scale=2,
                                      input_form=OFFICIAL_INPUT))

PROFILES: dict[str, TrainConfig] = {
    "quick": QUICK,
    # The contract test's: a few steps at 32 px, seconds.
    "smoke": QUICK.replace(loop={"out": "runs/motiongrouping-smoke", "steps": 6,
                                 "batch_size": 8, "log_every": 2},
                           model={"image_size": 32, "enc_channels": (8, 16, 16),
                                  "dec_channels": 8, "iters": 2}),
    # One GPU: the official network and batch, 1,000 steps of 32. Not measured (no GPU has run
    # it): an estimate of 10 minutes of an H100 (docs/baselines/motiongrouping.md).
    "gpu": TrainConfig(loop=dataclasses.replace(LOOP, out="runs/motiongrouping-gpu", steps=1_000),
                       model=ModelConfig(input_form=OFFICIAL_INPUT)),
}


def slots_for(parts: int) -> int:
    """K for data of `parts` moving parts: a slot each and one for the background (the
    official two are one object and the background); Geo's three shapes give the default 4."""
    return parts + 1


def profile(name: str, out: str, num_slots: int | None = None) -> TrainConfig:
    """The named profile's config writing to `out`, with K = `num_slots` when given."""
    if name not in PROFILES:
        raise MotionGroupingError(f"motiongrouping has no profile {name!r} (profiles: "
                                  f"{', '.join(PROFILES)})")
    cfg = PROFILES[name].replace(loop={"out": out})
    return cfg if num_slots is None else cfg.replace(model={"num_slots": num_slots})
