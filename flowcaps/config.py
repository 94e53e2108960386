"""Typed configs of the model and the trainer, and their JSON round trip.

Both configs are frozen dataclasses whose defaults are the paper's settings (the `paper`
profile); the other profiles in `flowcaps.profiles` are differences from them, and
`docs/deviations.md` says why each departs. A checkpoint stores `TrainConfig.to_json()` so
`load` rebuilds the exact model, and a resumed run can check that nothing changed.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from flowcaps import removed
from flowcaps.errors import FlowcapsError
from trainloop.configs import build, json_object, nest_loop, replaced
from trainloop.loop import LoopConfig
from trainloop.seeds import MAX_SEED

LAYERINGS, BACKGROUNDS = ("softmax", "over"), ("uniform", "static")
TRANSLATION_HEADS, SHAPE_CODES = ("fc", "softargmax"), ("image", "capsule")
DEVICES, SCHEDULES = ("cpu", "cuda", "auto"), ("constant", "cosine")
CENTER_FORMS, SMOOTH_FORMS = ("centroid", "spread", "spread_image"), ("frame", "pixels")
APPEARANCE_BACKGROUNDS = ("colour", "still")


@dataclass(frozen=True)
class ModelConfig:
    """The network; the defaults are the paper's Geo model: K=8, C=32 (|s| = C - 5 = 27)."""

    image_size: int = 64
    num_capsules: int = 8  # K
    capsule_dim: int = 32  # C = |s| + 4 pose numbers + 1 depth
    enc_channels: tuple[int, ...] = (32, 32, 64, 64)  # one 3x3 conv + ReLU + 2x2 avg-pool each
    enc_hidden: int = 256  # the tanh fully connected layer
    # GroupNorm groups after each encoder conv but the first; 0 = none (the paper).
    enc_norm: int = 0
    coord_channels: bool = False  # append (x, y) input channels (not the paper's)
    # "fc": translation from the FC layer (the paper); "softargmax": a heat map's mean (model.Encoder).
    translation_head: str = "fc"
    # "softargmax" only: capsule numbers also from the features pooled under its heat map.
    pooled_params: bool = False
    dec_hidden: int = 64  # not stated in the paper
    dec_depth: int = 6  # SELU layers of the decoder before its output (Table 3: 6; ablation 2)
    # "image": s_k from the encoder (the paper); "capsule": one learned code per capsule.
    shape_code: str = "image"
    depth_ordering: bool = True  # False: plain softmax of Lambda_k (ablation), whatever the layering
    # Depth to visibility: "softmax" (the paper) of d_k Lambda_k, or "over", front-to-back
    # compositing (model.FlowCapsules; docs/model.md gives both equations).
    layering: str = "softmax"
    # Unclaimed pixels: "uniform" (the paper) averages the K flows; "static" is a zero-flow entry.
    background: str = "uniform"
    mask_prior: float = 4.0  # gain of a fixed disc prior g * (1 - |v|^2) added to D's logit; 0 = off
    trans_bound: float = 1.5  # |t| <= bound via tanh, in the [-1, 1] image frame
    scale_init: float = 0.25  # canonical unit radius -> image radius (shapes span 0.2-0.3 L)
    scale_min: float = 0.05  # a floor on the scale keeps capsules from shrinking away
    depth_init: float = 4.0  # every capsule's start: at d ~ 0 the masks get no gradient, collapse
    depth_min: float = 0.0  # "static": d_k = depth_min + softplus(.), a floor against soft claims
    init_ring: float = 0.4  # capsules start on a ring of this radius, to break their symmetry

    @property
    def shape_dim(self) -> int:
        return self.capsule_dim - 5

    def validate(self) -> None:
        if self.capsule_dim < 6:
            raise FlowcapsError(f"capsule_dim must be >= 6 (|s| = C - 5 >= 1), got {self.capsule_dim}")
        if self.num_capsules < 1:
            raise FlowcapsError(f"num_capsules must be >= 1, got {self.num_capsules}")
        for name, allowed in (("layering", LAYERINGS), ("background", BACKGROUNDS),
                              ("translation_head", TRANSLATION_HEADS), ("shape_code", SHAPE_CODES)):
            if getattr(self, name) not in allowed:
                raise FlowcapsError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.layering == "over" and self.background != "static":
            raise FlowcapsError("layering 'over' needs the static background (what no capsule "
                                "covers is background)")
        if self.background == "static" and self.depth_init <= self.depth_min:
            raise FlowcapsError(f"depth_init ({self.depth_init}) must exceed depth_min ({self.depth_min})")
        if self.pooled_params and self.translation_head != "softargmax":
            raise FlowcapsError("pooled_params needs translation_head softargmax")
        if self.enc_norm < 0 or any(c % max(self.enc_norm, 1) for c in self.enc_channels[1:]):
            raise FlowcapsError(f"enc_norm ({self.enc_norm}) must be 0 or divide the channel "
                                f"counts {self.enc_channels[1:]} of the encoder convs after the first")
        for name, value, ok, want in (
                *((n, getattr(self, n), getattr(self, n) >= 1, ">= 1")
                  for n in ("dec_depth", "dec_hidden", "enc_hidden", "image_size")),
                *((n, getattr(self, n), getattr(self, n) > 0, "> 0") for n in ("trans_bound", "scale_init")),
                *((n, getattr(self, n), getattr(self, n) >= 0, ">= 0")
                  for n in ("scale_min", "mask_prior", "init_ring", "depth_min"))):
            if not ok:
                raise FlowcapsError(f"{name} must be {want}, got {value}")
        if not self.enc_channels or min(self.enc_channels) < 1:
            raise FlowcapsError(f"enc_channels must be one or more channel counts >= 1, got "
                                f"{list(self.enc_channels)}")
        if self.scale_min >= self.scale_init:
            raise FlowcapsError(f"scale_min ({self.scale_min}) must be below scale_init "
                                f"({self.scale_init})")
        pools = len(self.enc_channels)
        if self.image_size % (2 ** pools) or self.image_size < 2 ** pools:
            raise FlowcapsError(f"image_size {self.image_size} must be a multiple of "
                                f"{2 ** pools} ({pools} pooling stages)")


@dataclass(frozen=True)
class RefineConfig:
    """Test-time pose refinement (flowcaps.refine), an extension: the paper parses in one pass."""

    steps: int = 60  # 0 = off: the encoder's poses
    lr: float = 3e-3  # Adam's step on the pose numbers (image frame [-1, 1], radians, scale)
    band: int = 2  # px from an intensity change: elsewhere the masks give the poses no gradient
    points: int = 512  # band pixels fitted per step, drawn afresh (0: all; docs/results/flowcaps.md)
    seed: int = 0  # of the draws above

    def validate(self) -> None:
        # `not lr > 0` and isfinite: a NaN passes every comparison written the other way round
        if (self.steps < 0 or not self.lr > 0 or not math.isfinite(self.lr) or self.band < 0
                or self.points < 0):
            raise FlowcapsError(f"refine needs steps >= 0, lr > 0, band >= 0 and points >= 0, got "
                                f"steps={self.steps}, lr={self.lr}, band={self.band}, points={self.points}")


@dataclass(frozen=True)
class TrainConfig:
    """A training run: the model, the run folder and every optimisation choice. Where the paper
    states no value (batch 64, the sampled points, the initialisations), the default is ours."""

    model: ModelConfig = field(default_factory=ModelConfig)
    # The shared loop; its batch and `loop.rows` count over all ranks (docs/model.md).
    loop: LoopConfig = field(default_factory=lambda: LOOP)
    lr: float = 1e-4
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    max_pairs: int | None = None  # use only the first N training pairs
    mix_data: str | None = None  # a second dataset whose training pairs join DATA's, shuffled
    mix_first: float = 0.0  # the run's first fraction draws from mix_data alone (shapes first)
    points: int = 0  # pixel centres sampled per image for the losses; 0 = the full grid
    smooth_points: int = 128  # of those, how many also get +1 px neighbours for L_smooth
    edge_sampling: float = 0.0  # share of the points drawn near edges (reweighted: unbiased)
    edge_sigma: float = 3.0
    blur_sigmas: tuple[float, ...] = (0.0,)  # render-loss pyramid; (0.0,) = the paper's loss
    both_directions: bool = False  # also predict I' from I (swap the frames)
    w_smooth: float = 1e-4
    smooth_form: str = "frame"  # Phi's differences in the [-1, 1] frame (the paper) or in pixels
    w_center: float = 1e-2
    center_form: str = "centroid"  # the paper's centre of mass; "spread*": docs/model.md
    center_warmup: float = 0.0  # w_center ramps up from 0 over this fraction of the run
    w_appearance: float = 0.0  # losses.appearance_loss, flat-colour layers; 0 = off (the paper)
    appearance_background: str = "colour"  # its background layer: a flat colour, or "still" (frame 1)
    w_slow: float = 0.0  # losses.slow_loss, E_u |Phi(u)|^2 in pixels^2; 0 = off (the paper)
    prior_anneal: float = 0.0  # fade the heat maps' spatial prior out over this fraction (0 = keep)
    colour_shuffle: bool = False  # the encoder sees each frame's colour channels in random order
    bf16: bool = False  # bf16 autocast of the network: an opt-in, never chosen by the machine
    compile: bool = False  # torch.compile the loss step
    # CPU processes `flowcaps.train` starts (torchrun, see flowcaps.launch); 0 = one per core.
    cpu_ranks: int = 1
    # Fine-tune from this checkpoint's weights (optimizer and schedules afresh); None: from `seed`.
    init: str | None = None

    def validate(self) -> None:
        self.model.validate()
        for name, allowed in (("lr_schedule", SCHEDULES),
                              ("center_form", CENTER_FORMS), ("smooth_form", SMOOTH_FORMS),
                              ("appearance_background", APPEARANCE_BACKGROUNDS)):
            if getattr(self, name) not in allowed:
                raise FlowcapsError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.loop.device not in DEVICES:
            raise FlowcapsError(f"device must be one of {DEVICES}, got {self.loop.device!r}")
        if (self.loop.epochs is not None and self.loop.epochs < 1) or self.loop.batch_size < 1 \
                or self.lr <= 0:
            raise FlowcapsError("epochs and batch_size must be >= 1 and lr > 0")
        _check_run_limits(self)
        if not self.blur_sigmas or any(s < 0 for s in self.blur_sigmas):
            raise FlowcapsError(f"blur_sigmas must be a non-empty list of sigmas >= 0, got {self.blur_sigmas}")
        for name in ("edge_sampling", "center_warmup"):
            if not 0 <= getattr(self, name) <= 1:
                raise FlowcapsError(f"{name} must be a fraction in [0, 1], got {getattr(self, name)}")
        if not self.edge_sigma > 0:
            raise FlowcapsError(f"edge_sigma must be > 0 px, got {self.edge_sigma}")
        if not 0 <= self.prior_anneal <= 1:
            raise FlowcapsError(f"prior_anneal must be a fraction of the run in [0, 1], got {self.prior_anneal}")
        if self.mix_data is not None and not self.mix_data.strip():
            raise FlowcapsError("mix_data must name a dataset folder (or be null for none)")
        if not 0 <= self.mix_first < 1 or (self.mix_first > 0 and self.mix_data is None):
            raise FlowcapsError(f"mix_first must be in [0, 1) and needs mix_data, got "
                                f"{self.mix_first} with mix_data={self.mix_data!r}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        raw = json_object(text, FlowcapsError)
        if not isinstance(raw.get("model", {}), dict):
            raise FlowcapsError("train config must be a JSON object (with an object as model)")
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "TrainConfig":
        raw = removed.drop(raw, removed.TRAIN_FIELDS)  # keys of older configs, at "off"
        raw = {**ADDED, **raw}
        if raw.get("bf16") == "auto":  # older configs let the machine decide (meta says what)
            raw = {**raw, "bf16": False}
        model = removed.drop(raw.pop("model", {}), removed.MODEL_FIELDS, "model.")
        raw = nest_loop(raw, LOOP, RENAMED)  # older configs: the loop's settings flat, `pairs`
        return build(cls, {**raw, "model": model}, FlowcapsError)

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed (lists given for tuples); `model` and `loop` may be
        dicts of their fields' changes, and a loop field may be named alone (`seed`, `pairs`
        for `loop.rows`)."""
        return replaced(self, {RENAMED.get(k, k): v for k, v in changes.items()},
                        FlowcapsError)


# The paper's run: 150 epochs of 64 pairs (the global batch), gradients clipped at norm 1.
LOOP = LoopConfig(out="runs/flowcaps", seed=0, batch_size=64, epochs=150, grad_clip=1.0,
                  explode_factor=50.0, log_every=20, checkpoint_minutes=2.0)
ADDED = {"smooth_form": "pixels"}  # keys added since: what a stored config without them computed
RENAMED = {"pairs": "rows"}  # loop settings stored before the loop had its own field


def _check_run_limits(cfg: TrainConfig) -> None:
    """The run's budget, data, processes, bookkeeping, loss weights, clip: each must be possible."""
    loop = cfg.loop
    checks = [(loop.max_minutes is None or loop.max_minutes > 0,
               f"max_minutes must be > 0 (or null for none), got {loop.max_minutes}"),
              (bool(str(loop.out).strip()), "out (the run folder) is empty; name a folder"),
              (loop.rows is None or loop.rows >= 1,
               f"pairs (loop.rows) must be >= 1 (or null for epochs), got {loop.rows}"),
              (cfg.max_pairs is None or cfg.max_pairs >= 1,
               f"max_pairs must be >= 1 (or null for all), got {cfg.max_pairs}"),
              (0 <= loop.seed <= MAX_SEED, f"seed must be in 0..{MAX_SEED}, got {loop.seed}"),
              (cfg.warmup_steps >= 0, f"warmup_steps must be >= 0, got {cfg.warmup_steps}"),
              (loop.threads >= 0, f"threads must be >= 0 (0 = auto), got {loop.threads}"),
              (loop.checkpoint_minutes >= 0,
               f"checkpoint_minutes must be >= 0, got {loop.checkpoint_minutes}"),
              (loop.log_every >= 1, f"log_every must be >= 1, got {loop.log_every}"),
              (loop.grad_clip is None or loop.grad_clip >= 0,
               f"grad_clip must be >= 0 (0 = off), got {loop.grad_clip}"),
              (cfg.cpu_ranks >= 0, f"cpu_ranks must be >= 0 (0 = one per core), got {cfg.cpu_ranks}"),
              (cfg.points >= 0 and cfg.smooth_points >= 0, "points and smooth_points must be >= 0"),
              *((v >= 0, f"{n} must be >= 0 (0 = off), got {v}") for n, v in vars(cfg).items()
                if n.startswith("w_"))]
    for ok, message in checks:
        if not ok:
            raise FlowcapsError(message)

