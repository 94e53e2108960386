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

DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class ModelConfig:
    """The network (PSD's `model.py` unless noted)."""

    image_size: int = 64  # PSD: 128; the benchmark's data is 64 px
    latent_dim: int = 32  # D: latent dimensions = image-feature channels = motion maps
    kernel_size: int = 5  # cross-convolution kernel per dimension
    kernel_hidden: tuple[int, ...] = (64, 128, 64)  # per-dimension MLP, 1 -> ... -> kernel_size^2
    motion_kernels: tuple[int, ...] = (9, 9, 5, 5)  # depthwise convs of the motion decoder
    # The motion decoder runs at image_size / motion_scale and its maps are upsampled
    # bilinearly (PSD: 1, full size); 2 with halved kernels is the CPU profiles' saving.
    motion_scale: int = 1
    unet_width: int = 64  # first UNet level of the image decoder (PSD: ngf = 64)
    structure_init: float = -10.0  # logit of every parent-child weight at the start
    # Added to the squared motion norm before its square root, so the gradient stays finite
    # where a motion map is exactly zero.
    norm_eps: float = 1e-12
    mask_eps: float = 1e-4  # PSD: a mask is |motion| / (max |motion| + eps)

    def validate(self) -> None:
        side = self.image_size
        if side < 16 or side & (side - 1):
            raise PsdError(f"image_size must be a power of two >= 16, got {side}")
        if self.latent_dim < 1 or self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise PsdError(f"latent_dim must be >= 1 and kernel_size odd, got "
                           f"{self.latent_dim}, {self.kernel_size}")
        if any(k % 2 == 0 for k in self.motion_kernels) or not self.motion_kernels:
            raise PsdError(f"motion_kernels must be odd sizes, got {self.motion_kernels}")
        if self.motion_scale not in (1, 2, 4):
            raise PsdError(f"motion_scale must be 1, 2 or 4, got {self.motion_scale}")
        if self.unet_width < 1 or not self.kernel_hidden:
            raise PsdError("unet_width must be >= 1 and kernel_hidden non-empty")

    @property
    def flow_scale(self) -> float:
        """Pixels -> PSD's flow target units (percent of the image side, its `scale` = 100)."""
        return 100.0 / self.image_size


@dataclass(frozen=True)
class TrainConfig:
    """The trainer. Stage 1 trains every dimension; stage 2 (PSD's `dimensions` given) freezes
    the motion encoder, keeps the active dimensions and learns the structure."""

    model: ModelConfig = field(default_factory=ModelConfig)
    out: str = "runs/psd"
    seed: int = 0
    device: str = "auto"
    threads: int | None = None  # CPU threads (None: torch's default)
    batch_size: int = 16  # PSD's demo: 32; smaller steps learn more per pair (docs/baselines/psd.md)
    lr: float = 2e-3
    structure_lr: float = 0.05  # the structure logits start at -10 and must reach ~0 in budget
    steps: int = 100000  # step budget
    max_minutes: float | None = None  # time budget (training seconds); the run stops at either
    stage1_fraction: float = 0.8  # share of the budget spent before choosing active dimensions
    max_pairs: int | None = None  # train on the first pairs only (None: all)
    w_flow: float = 1.0
    w_kl: float = 0.01  # beta of the KL to N(0, I)
    w_structure: float = 1e-3  # L1 of the structure weights (sparse parent-child relations)
    w_local: float = 0.05  # L1 of the local (pre-structure) motion maps, stage 2 only
    w_image: float = 1.0  # frame-1 prediction (image decoder, flow detached)
    kl_active: float = 0.5  # nats: a dimension whose mean KL exceeds this is active
    min_active: int = 3  # at least this many dimensions (the largest KL) are kept
    active_pairs: int = 512  # train pairs whose posterior KL chooses the active dimensions
    checkpoint_minutes: float = 2.0
    log_every: int = 20
    explode_factor: float = 50.0  # stop when the loss exceeds this times its recent median

    def validate(self) -> None:
        self.model.validate()
        if self.device not in DEVICES:
            raise PsdError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.batch_size < 2:  # batch norm needs two samples
            raise PsdError(f"batch_size must be >= 2, got {self.batch_size}")
        if self.steps < 1 or (self.max_minutes is not None and self.max_minutes <= 0):
            raise PsdError(f"steps must be >= 1 and max_minutes > 0, got {self.steps}, "
                           f"{self.max_minutes}")
        if not 0 < self.stage1_fraction < 1:
            raise PsdError(f"stage1_fraction must be in (0, 1), got {self.stage1_fraction}")
        weights = (self.lr, self.structure_lr, self.w_flow, self.w_kl, self.w_structure,
                   self.w_local, self.w_image)
        if min(weights) < 0 or not all(math.isfinite(w) for w in weights):
            raise PsdError("learning rates and loss weights must be finite and >= 0")
        if not 1 <= self.min_active <= self.model.latent_dim:
            raise PsdError(f"min_active must be in 1..latent_dim, got {self.min_active}")
        if self.active_pairs < 2 or self.explode_factor <= 1 or self.log_every < 1:
            raise PsdError("active_pairs must be >= 2, explode_factor > 1, log_every >= 1")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise PsdError(f"train config is not valid JSON: {err}") from None
        raw = dict(raw)
        model = _build(ModelConfig, raw.pop("model", {}))
        return _build(cls, {**raw, "model": model})

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed; `model` may be a dict of model-field changes."""
        changes = _tuples(changes)
        model = changes.pop("model", None)
        try:
            if isinstance(model, dict):
                model = dataclasses.replace(self.model, **_tuples(model))
            if model is not None:
                changes["model"] = model
            return dataclasses.replace(self, **changes)
        except TypeError as err:
            raise PsdError(f"unknown config field: {err}") from None


def _tuples(raw: dict[str, Any]) -> dict[str, Any]:
    # JSON gives lists; the frozen dataclasses hold tuples so they stay hashable.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}


def _build(cls: type, raw: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(raw) - names
    if unknown:
        raise PsdError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    return cls(**_tuples(raw))


# The quick profile: a 2-core CPU, about 30 minutes wall with data and evaluation; one thread,
# since two trained slower on shared cores (docs/baselines/psd.md, speed).
QUICK = TrainConfig(out="runs/psd-quick", threads=1, max_minutes=22.0, steps=1_000_000,
                    model=ModelConfig(unet_width=16, motion_scale=2, motion_kernels=(5, 5, 3, 3)))

PROFILES: dict[str, TrainConfig] = {
    "quick": QUICK,
    # The contract test's: a few dozen steps at 32 px, seconds.
    "smoke": QUICK.replace(out="runs/psd-smoke", max_minutes=None, steps=40,
                           batch_size=8, active_pairs=16, log_every=5,
                           model={"image_size": 32, "unet_width": 8}),
    # One GPU: PSD's UNet width, a larger batch, a few minutes.
    "gpu": QUICK.replace(out="runs/psd-gpu", threads=None, batch_size=128, max_minutes=8.0,
                         model={"unet_width": 64, "motion_scale": 1,
                                "motion_kernels": (9, 9, 5, 5)}),
}
