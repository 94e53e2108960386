"""Typed configs of the PSD model and its trainer, their JSON round trip, and the profiles.

Settings taken from PSD's public model code (zhenjia-xu/psd, `model.py`) keep its numbers;
every setting the sources leave open, and every change, is argued in docs/baselines/psd.md.
A checkpoint stores `TrainConfig.to_json()`, so `load` rebuilds the exact model and a resumed
run can check that nothing changed.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from baselines.psd.errors import PsdError
from trainloop.configs import build, json_object, nest_loop, replaced
from trainloop.loop import LoopConfig

DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class ModelConfig:
    """The network (PSD's `model.py` unless noted)."""

    image_size: int = 64  # PSD: 128; set by the data (geogen --size 64 or 128)
    latent_dim: int = 32  # D: latent dimensions = image-feature channels = motion maps
    kernel_size: int = 5  # cross-convolution kernel per dimension
    kernel_hidden: tuple[int, ...] = (64, 128, 64)  # per-dimension MLP, 1 -> ... -> kernel_size^2
    motion_kernels: tuple[int, ...] = (9, 9, 5, 5)  # depthwise convs of the motion decoder
    # The motion decoder runs at image_size / motion_scale and its maps are upsampled
    # bilinearly (PSD: 1, full size).
    motion_scale: int = 1
    # The image features' grid, as a fraction of the side (PSD: 4, two stride-2 convs). At 64 px
    # 2 gives the features PSD's grid relative to the scene at its 128 px (its second stride-2
    # conv runs at stride 1).
    feature_stride: int = 4
    # The grid in stage 2 (None: as in stage 1). Stage 1 learns the motions' dimensions, which
    # needs many pairs; stage 2 learns the masks, which need the finer grid.
    stage2_feature_stride: int | None = None
    # PSD: False. True runs the decoder as net(x) - net(-x), so one dimension moves a part
    # both ways and zero input gives zero motion.
    odd_motion: bool = False
    # Stride-2 5x5 convs of the motion encoder (PSD: 7, reaching 1x1 at 128 px; at a smaller
    # side the last ones run at 1x1). None: log2(image_size), one per halving.
    motion_encoder_layers: int | None = 7
    unet_width: int = 64  # first UNet level of the image decoder (PSD: ngf = 64)
    unet_down_bias: bool = False  # PSD: no bias in the UNet's down convs
    # Batch-norm gains start at normal(1, bn_init_std) (PSD: 1.0); 0 starts them at 1.
    bn_init_std: float = 1.0
    structure_init: float = -10.0  # logit of every parent-child weight at the start
    # Stage 2's flow: "all" sums every dimension's motion (PSD), "active" the active ones only,
    # so a live copy left out of the active set cannot carry part of a chosen part's motion.
    stage2_flow: str = "all"
    # Added to the squared motion norm before its square root, so the gradient stays finite
    # where a motion map is exactly zero.
    norm_eps: float = 1e-12
    mask_eps: float = 1e-4  # PSD: a mask is |motion| / (max |motion| + eps)

    @property
    def encoder_layers(self) -> int:
        layers = self.motion_encoder_layers
        return int(math.log2(self.image_size)) if layers is None else layers

    def validate(self) -> None:
        side = self.image_size
        if side < 16 or side & (side - 1):
            raise PsdError(f"image_size must be a power of two >= 16, got {side}")
        if self.latent_dim < 1 or self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise PsdError(f"latent_dim must be >= 1 and kernel_size odd, got "
                           f"{self.latent_dim}, {self.kernel_size}")
        if any(k % 2 == 0 for k in self.motion_kernels) or not self.motion_kernels:
            raise PsdError(f"motion_kernels must be odd sizes, got {self.motion_kernels}")
        if self.stage2_flow not in ("all", "active"):
            raise PsdError(f"stage2_flow must be 'all' or 'active', got {self.stage2_flow!r}")
        if self.motion_scale not in (1, 2, 4):
            raise PsdError(f"motion_scale must be 1, 2 or 4, got {self.motion_scale}")
        stage2 = self.stage2_feature_stride
        grids = {"feature_stride": self.feature_stride,
                 "stage2_feature_stride": self.feature_stride if stage2 is None else stage2}
        for name, f in grids.items():
            if f not in (2, 4) or self.motion_scale > f:
                raise PsdError(f"{name} must be 2 or 4 and at least motion_scale "
                               f"({self.motion_scale}), got {f}")
        if self.unet_width < 1 or not self.kernel_hidden:
            raise PsdError("unet_width must be >= 1 and kernel_hidden non-empty")
        if not 2 ** self.encoder_layers >= side or self.encoder_layers > 12:
            raise PsdError(f"motion_encoder_layers must reach 1x1 (2^layers >= {side}), got "
                           f"{self.encoder_layers}")
        if not 0 <= self.bn_init_std < 10:
            raise PsdError(f"bn_init_std must be in [0, 10), got {self.bn_init_std}")

    @property
    def flow_scale(self) -> float:
        """Pixels -> PSD's flow target units (percent of the image side, its `scale` = 100)."""
        return 100.0 / self.image_size


@dataclass(frozen=True)
class TrainConfig:
    """The trainer. Stage 1 trains every dimension; stage 2 (PSD's `dimensions` given) freezes
    the motion encoder, keeps the active dimensions and learns the structure."""

    model: ModelConfig = field(default_factory=ModelConfig)
    # The shared loop's settings: the budget in `loop.steps` (every schedule follows it),
    # `loop.max_minutes` only a guard (past it the run saves its checkpoint and stops with an
    # error, exporting no model).
    loop: LoopConfig = field(default_factory=lambda: LOOP)
    lr: float = 2e-3
    structure_lr: float = 0.05  # the structure logits start at -10 and must reach ~0 in budget
    stage1_fraction: float = 0.8  # share of the step budget before choosing active dimensions
    # Stage 2 starts with a fresh Adam (moments and step counts cleared) rather than stage 1's
    # state carried over; PSD publishes no schedule (experiments/2026-12-07-psd-fresh-adam).
    stage2_fresh_optimizer: bool = False
    max_pairs: int | None = None  # train on the first pairs only (None: all)
    w_flow: float = 1.0
    w_kl: float = 0.01  # beta of the KL to N(0, I)
    # Share of the budget over which the KL weight rises linearly from 0 to w_kl (0: constant
    # from the start). PSD publishes no schedule; a warm-up is the usual guard against the
    # dimensions collapsing to the prior before they carry any motion.
    kl_warmup: float = 0.0
    w_structure: float = 1e-3  # L1 of the structure weights (sparse parent-child relations)
    # L1 of the local (pre-structure) motion maps in stage 2: not in PSD's paper or code.
    w_local: float = 0.0
    w_image: float = 1.0  # frame-1 prediction (image decoder, flow detached)
    # nats: a dimension whose mean KL exceeds this is active; no other dimension ever is, so
    # stage 2 waits (the choice is retried every `retry_steps`) until one exceeds it.
    kl_active: float = 0.5
    active_pairs: int = 512  # train pairs whose posterior KL chooses the active dimensions
    # A live dimension whose posterior means correlate with a chosen one's (larger KL) by more
    # than this, in absolute value, is left out as a copy of the same motion (1.0: off; PSD
    # gives no rule beyond its chosen dimensions).
    active_max_corr: float = 1.0
    retry_steps: int = 200
    # Stage 1 begins as this many short starts (seeds seed, seed + 1000, ...), each trained for
    # `start_fraction` of the steps on the run's schedule; the run goes on from the one with
    # the lowest training flow loss (baselines.psd.starts; 1: one run, as PSD trains).
    starts: int = 1
    start_fraction: float = 0.04
    probe_pairs: int = 512  # train pairs the finished run's probe scores (baselines.psd.probe)

    def validate(self) -> None:
        self.model.validate()
        loop = self.loop
        if loop.device not in DEVICES:
            raise PsdError(f"device must be one of {', '.join(DEVICES)}, got {loop.device!r}")
        if loop.batch_size < 2:  # batch norm needs two samples
            raise PsdError(f"batch_size must be >= 2, got {loop.batch_size}")
        if loop.steps is None or loop.steps < 1 or (loop.max_minutes is not None
                                                    and loop.max_minutes <= 0):
            raise PsdError(f"steps (the budget) must be >= 1 and max_minutes (a guard) > 0 or "
                           f"None, got {loop.steps}, {loop.max_minutes}")
        if not 0 < self.stage1_fraction < 1:
            raise PsdError(f"stage1_fraction must be in (0, 1), got {self.stage1_fraction}")
        if not 0 <= self.kl_warmup <= self.stage1_fraction:
            raise PsdError(f"kl_warmup must be in [0, stage1_fraction = {self.stage1_fraction}], "
                           f"got {self.kl_warmup}")
        weights = (self.lr, self.structure_lr, self.w_flow, self.w_kl, self.w_structure,
                   self.w_local, self.w_image)
        if min(weights) < 0 or not all(math.isfinite(w) for w in weights):
            raise PsdError("learning rates and loss weights must be finite and >= 0")
        if self.kl_active < 0 or self.retry_steps < 1 or self.probe_pairs < 0:
            raise PsdError("kl_active must be >= 0, retry_steps >= 1 and probe_pairs >= 0")
        if self.starts < 1 or not 0 < self.start_fraction < self.stage1_fraction:
            raise PsdError(f"starts must be >= 1 and start_fraction in (0, stage1_fraction = "
                           f"{self.stage1_fraction}), got {self.starts}, {self.start_fraction}")
        if not 0 < self.active_max_corr <= 1:
            raise PsdError(f"active_max_corr must be in (0, 1], got {self.active_max_corr}")
        if self.active_pairs < 2 or (loop.explode_factor is not None
                                     and loop.explode_factor <= 1) or loop.log_every < 1:
            raise PsdError("active_pairs must be >= 2, explode_factor > 1, log_every >= 1")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        raw = json_object(text, PsdError)
        raw = {k: v for k, v in raw.items() if k not in RETIRED}
        model = dict(raw.pop("model", {}))
        if model and "odd_motion" not in model:  # written before these switches existed
            model = {**LEGACY_MODEL, "motion_encoder_layers": None, **model}
        raw = nest_loop(raw, LOOP)  # older configs: the loop's settings flat beside PSD's
        return build(cls, {**raw, "model": model}, PsdError)

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed; `model` and `loop` may be dicts of their fields'
        changes, and a loop field may be named alone (`seed`)."""
        return replaced(self, changes, PsdError)


# The shared loop's settings PSD trains with unless a profile says otherwise: 100,000 steps of
# 16 pairs (PSD's demo: 32; smaller steps learn more per pair, docs/baselines/psd.md).
LOOP = LoopConfig(out="runs/psd", seed=0, batch_size=16, steps=100_000, explode_factor=50.0,
                  log_every=20, checkpoint_minutes=2.0)
# What a checkpoint written before the faithful profile trained with, for the fields it lacks.
LEGACY_MODEL = {"odd_motion": True, "unet_down_bias": True, "bn_init_std": 0.0}
# Train fields that no longer exist: forced dead dims active; a stage-2 pair reserve that cost
# stage 1 its parts (experiments/2026-12-06-psd-stage2-pairs).
RETIRED = ("min_active", "stage2_pairs", "stage2_speed")

# The faithful model (PSD's public code) at the data's side, PSD's training as we read it:
# the gpu profile's, and the base of the others. 8,000 steps of 16 (128k pairs): about what
# its 160-minute record trained on one CPU thread.
FAITHFUL = TrainConfig().replace(loop={"out": "runs/psd-faithful", "threads": 1, "steps": 8_000})

# The quick profile: 4,000 steps of 16 (64k pairs), about 22 minutes of training on one thread
# of a 2-core CPU (30 wall with data and evaluation). It gives up the full-size motion decoder
# (half size, kernels halved, upsampled) and the UNet's width, so that it sees enough pairs for
# its parts to separate (docs/baselines/psd.md).
QUICK = FAITHFUL.replace(loop={"out": "runs/psd-quick", "steps": 4_000},
                         model={"motion_scale": 2, "motion_kernels": (5, 5, 3, 3),
                                "unet_width": 16})

# The long profile: 28,000 steps of 16 (448k pairs) with three starts of 1,120 steps, about
# 160 minutes of training on one thread of the 2-core CPU of its records (under 3 hours with
# the evaluation). The quick model with the four changes that gave each part a dimension and
# turned the structure on (docs/baselines/psd.md, "Profiles"): the odd motion decoder, lr 5e-3
# with the KL weight warmed up over a quarter of the budget, the local-motion L1 in stage 2,
# and no copy of a chosen dimension among the active ones; stage 1 from the best of three
# starts. Stage 2 draws the masks from image features at half the side
# (`stage2_feature_stride`; experiments/2026-12-06-psd-feature-stride). `w_local` 0.5 makes the
# children's local motions shed the parent's, so that both of the circle's links reach 1
# (0.2 left them at the loss's optimum near 0.8; experiments/2026-12-07-psd-local-weight).
# Stage 2's flow from the active dimensions only: a live copy left out of the active set took
# the circle's motion where the circle's mask fell short (experiments/2026-12-07-psd-stage2-flow).
# Stage 2 with a fresh Adam: with stage 1's state carried over, seed 1 kept the circle's local
# motion on the triangle and lost the triangle's (experiments/2026-12-07-psd-fresh-adam).
LONG = QUICK.replace(loop={"out": "runs/psd-long", "steps": 28_000}, lr=5e-3, kl_warmup=0.25,
                     w_local=0.5, active_max_corr=0.5, starts=3, stage2_fresh_optimizer=True,
                     model={"odd_motion": True, "stage2_feature_stride": 2,
                            "stage2_flow": "active"})

PROFILES: dict[str, TrainConfig] = {
    "quick": QUICK,
    "long": LONG,
    # The contract test's: a few dozen steps at 32 px, seconds; they reach about 0.08 nats, so
    # its live-dimension threshold is lower.
    "smoke": QUICK.replace(loop={"out": "runs/psd-smoke", "steps": 40, "batch_size": 8,
                                 "log_every": 5},
                           kl_active=0.05, active_pairs=16, probe_pairs=16,
                           model={"image_size": 32, "unet_width": 8}),
    # One GPU: the faithful model, PSD's demo batch; 13,000 steps of 32 (416k pairs). Not
    # measured (no GPU has run it): an estimate of 15 minutes of an H100 (docs/baselines/psd.md).
    "gpu": FAITHFUL.replace(loop={"out": "runs/psd-gpu", "threads": 0, "batch_size": 32,
                                  "steps": 13_000}),
}
