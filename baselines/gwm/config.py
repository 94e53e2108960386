"""Typed configs of the Guess What Moves mask network and its trainer, their JSON round trip,
and the profiles.

Settings taken from the official code (karazijal/guess-what-moves: `src/config.py`,
`src/flow_reconstruction.py`, `src/losses/reconstruction_loss.py`, `src/main.py` and the
default `maskformer_R50_bs16_160k_dino.yaml` with its bases) keep its numbers; every change is
argued in docs/baselines/gwm.md. A checkpoint stores `TrainConfig.to_json()`, so `load`
rebuilds the exact model and a resumed run can check that nothing changed.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from baselines.gwm.errors import GwmError
from trainloop.configs import build, json_object, nest_loop, replaced
from trainloop.loop import LoopConfig

DEVICES = ("cpu", "cuda", "auto")
FLOW_MODELS = ("affine", "quadratic")  # official: quadratic (`get_quad_flow`)
CRITERIA = ("l2", "l1")  # official GWM.CRITERION "L2"


@dataclass(frozen=True)
class ModelConfig:
    """The mask network: a UNet from one RGB frame to K mask logits (official: MaskFormer on a
    DINO ViT-B/8, which this benchmark has no pretrained weights for)."""

    image_size: int = 64
    num_masks: int = 4  # K; official NUM_OBJECT_QUERIES 4; the adapter takes it from the data
    # The encoder's widths, one level each (two 3x3 convs, group norm, ReLU), a 2x2 max-pool
    # between levels; the decoder mirrors them with skip connections.
    widths: tuple[int, ...] = (32, 64, 128)
    groups: int = 8  # group norm's groups (official pixel decoder: GN); must divide each width

    @property
    def levels(self) -> int:
        return len(self.widths)

    def validate(self) -> None:
        if self.num_masks < 2:
            raise GwmError(f"num_masks must be >= 2 (a softmax over one mask is constant), got "
                           f"{self.num_masks}")
        if not self.widths or min(self.widths) < 1:
            raise GwmError("widths must be non-empty and every width >= 1")
        if self.groups < 1 or any(w % self.groups for w in self.widths):
            raise GwmError(f"groups must be >= 1 and divide every width {list(self.widths)}, "
                           f"got {self.groups}")
        pooled = 2 ** (self.levels - 1)
        if self.image_size < 2 * pooled or self.image_size % pooled:
            raise GwmError(f"image_size must be a multiple of {pooled} (the encoder's pooling) "
                           f"and >= {2 * pooled}, got {self.image_size}")


@dataclass(frozen=True)
class TrainConfig:
    """The trainer (the official `main.py` and its solver settings unless noted)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    # The shared loop's settings: the budget in `loop.steps` of `loop.batch_size` pairs.
    loop: LoopConfig = field(default_factory=lambda: LOOP)
    lr: float = 1.5e-4  # official BASE_LR (AdamW)
    weight_decay: float = 0.01  # official WEIGHT_DECAY (AdamW); 0 on group norms (official)
    warmup_steps: int = 1500  # official WARMUP_ITERS, linear from ~0 (WARMUP_FACTOR 1e-6)
    # Official WarmupPolyLR: rate x (1 - step / poly_steps) ** poly_power with MAX_ITER 160k,
    # stopped early at TOTAL_ITER 20k; a profile scales poly_steps with its own budget.
    poly_steps: int = 160_000
    poly_power: float = 0.9
    flow_model: str = "quadratic"
    criterion: str = "l2"
    w_rec: float = 0.03  # official LOSS_MULT.REC, on the mean squared flow error in pixels^2
    flow_clip: float = 20.0  # official: the flow is clipped to +-20 px before the loss
    # Added to the diagonal of each mask's normal equations (their pixel means), so an empty
    # mask gives a zero fit instead of a singular solve (official: a QR solve with none).
    ridge: float = 1e-6
    max_pairs: int | None = None  # train on the first pairs only (None: all)

    def validate(self) -> None:
        self.model.validate()
        loop = self.loop
        if loop.device not in DEVICES:
            raise GwmError(f"device must be one of {', '.join(DEVICES)}, got {loop.device!r}")
        if loop.batch_size < 1 or loop.steps is None or loop.steps < 1 or loop.log_every < 1:
            raise GwmError(f"batch_size, steps and log_every must be >= 1, got "
                           f"{loop.batch_size}, {loop.steps}, {loop.log_every}")
        if loop.max_minutes is not None and not loop.max_minutes > 0:
            raise GwmError(f"max_minutes (a guard) must be > 0 or None, got {loop.max_minutes}")
        if self.flow_model not in FLOW_MODELS:
            raise GwmError(f"flow_model must be one of {', '.join(FLOW_MODELS)}, got "
                           f"{self.flow_model!r}")
        if self.criterion not in CRITERIA:
            raise GwmError(f"criterion must be one of {', '.join(CRITERIA)}, got "
                           f"{self.criterion!r}")
        if self.warmup_steps < 0 or self.poly_steps < 1:
            raise GwmError(f"warmup_steps must be >= 0 and poly_steps >= 1, got "
                           f"{self.warmup_steps}, {self.poly_steps}")
        for name in ("lr", "weight_decay", "poly_power", "w_rec", "ridge"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise GwmError(f"{name} must be finite and >= 0, got {value}")
        if not (math.isfinite(self.flow_clip) and self.flow_clip > 0):
            raise GwmError(f"flow_clip must be finite and > 0, got {self.flow_clip}")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise GwmError(f"max_pairs must be >= 1, got {self.max_pairs}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        raw = json_object(text, GwmError)
        return build(cls, nest_loop(raw, LOOP), GwmError)

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed; `model` and `loop` may be dicts of their fields'
        changes, and a loop field may be named alone (`seed`)."""
        return replaced(self, changes, GwmError)


# The official training: 8 images a step (IMS_PER_BATCH), gradients clipped to a total norm of
# 0.01 (CLIP_GRADIENTS full_model), 20,000 steps (TOTAL_ITER).
LOOP = LoopConfig(out="runs/gwm", seed=0, batch_size=8, steps=20_000, grad_clip=0.01,
                  explode_factor=50.0, log_every=20, checkpoint_minutes=2.0)

# CPU profiles: one thread each (two runs share the 2-core machine). Their steps are sized from
# a step's CPU time (0.33 s at 64 px, docs/baselines/gwm.md, "Profiles"): about 90 minutes and
# 2.7 hours. The poly schedule runs over 8 budgets, as the official's 20k of 160k steps.
QUICK_STEPS, LONG_STEPS = 16_000, 30_000
QUICK = TrainConfig(loop=dataclasses.replace(LOOP, out="runs/gwm-quick", threads=1,
                                            steps=QUICK_STEPS),
                    warmup_steps=500, poly_steps=8 * QUICK_STEPS)

PROFILES: dict[str, TrainConfig] = {
    "quick": QUICK,
    "long": QUICK.replace(loop={"out": "runs/gwm-long", "steps": LONG_STEPS},
                          poly_steps=8 * LONG_STEPS),
    # The contract test's: a few steps at 32 px, seconds.
    "smoke": QUICK.replace(loop={"out": "runs/gwm-smoke", "steps": 6, "log_every": 2},
                           model={"image_size": 32, "widths": (8, 16)}, warmup_steps=2),
    # One GPU: the official batch and step count with wider levels. Not measured (no GPU has
    # run it): an estimate of about 30 minutes (docs/baselines/gwm.md, "Profiles").
    "gpu": TrainConfig(loop=dataclasses.replace(LOOP, out="runs/gwm-gpu"),
                       model=ModelConfig(widths=(64, 128, 256, 512))),
}


def masks_for(parts: int) -> int:
    """K for data of `parts` moving parts: one mask each and one for the background (the
    official K = 4 on real videos; Geo's three shapes give 4 too)."""
    return parts + 1


def profile(name: str, out: str, num_masks: int | None = None) -> TrainConfig:
    """The named profile's config writing to `out`, with K = `num_masks` when given."""
    if name not in PROFILES:
        raise GwmError(f"gwm has no profile {name!r} (profiles: {', '.join(PROFILES)})")
    cfg = PROFILES[name].replace(loop={"out": out})
    return cfg if num_masks is None else cfg.replace(model={"num_masks": num_masks})
