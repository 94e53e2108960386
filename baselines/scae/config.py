"""SCAE and FlowSCAE settings: frozen dataclasses, one base per model, profiles as `replace`.

Where each value comes from (the SCAE paper, its official code, or a change made here, and why)
is written down in docs/baselines/scae.md; comments here say only what a field means.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from baselines.scae.errors import ScaeError
from trainloop.configs import build, json_object, nest_loop, replaced
from trainloop.loop import LoopConfig

TEMPLATE_KINDS = ("coloured", "textured")


@dataclass(frozen=True)
class PCAEConfig:
    """Part capsule autoencoder: encoder, templates and the image likelihood."""

    image_size: int = 64
    n_parts: int = 16  # M part capsules, one learned template each
    template_size: int = 16  # side of a template, in template pixels
    n_special: int = 16  # special features per part (they give the colour or texture)
    enc_channels: tuple[int, ...] = (128, 128, 128, 128)
    enc_strides: tuple[int, ...] = (2, 2, 1, 1)
    templates: str = "coloured"  # "coloured" (Geo) or "textured" (Geo+)
    texture_size: int = 4  # side of a textured template's colour grid
    pixel_std: float = 0.1  # sigma of every component's Gaussian in the pixel mixture
    presence_noise: float = 4.0  # width of the uniform noise on presence logits (training)
    init_scale: float = 0.3  # a template's scale (share of the image side) at the start
    bg_logit: float = 3.0  # the background's mixing logit at the start (learned)

    def validate(self) -> None:
        if self.templates not in TEMPLATE_KINDS:
            raise ScaeError(f"templates must be one of {TEMPLATE_KINDS}, got {self.templates!r}")
        if len(self.enc_channels) != len(self.enc_strides) or not self.enc_channels:
            raise ScaeError("enc_channels and enc_strides need the same (non-zero) length")
        if min(self.n_parts, self.template_size, self.n_special, self.texture_size) < 1:
            raise ScaeError("n_parts, template_size, n_special and texture_size must be >= 1")
        if not 0.01 < self.init_scale < 1.01:
            raise ScaeError("init_scale must be in (0.01, 1.01)")
        if self.pixel_std <= 0 or self.image_size < 8:
            raise ScaeError("pixel_std must be > 0 and image_size >= 8")


@dataclass(frozen=True)
class OCAEConfig:
    """Object capsule autoencoder: Set Transformer encoder, capsule decoder, sparsity losses."""

    n_objects: int = 8  # K object capsules
    st_layers: int = 3  # self-attention blocks of the Set Transformer
    st_heads: int = 1
    st_dim: int = 16  # width of the self-attention blocks
    st_out: int = 256  # width of each object capsule's encoding
    caps_params: int = 32  # per-capsule parameter vector
    caps_hidden: int = 128  # hidden width of the per-capsule MLPs
    presence_noise: float = 4.0  # uniform noise width on object and vote presence logits
    n_classes: int = 4  # the number of classes the prior sparsity aims its counts at
    w_caps_ll: float = 1.0
    w_dynamic_l2: float = 10.0
    w_prior_within: float = 2.0
    w_prior_between: float = 0.35
    w_posterior_within: float = 0.7
    w_posterior_between: float = 0.2

    def validate(self) -> None:
        if min(self.n_objects, self.st_layers, self.st_heads, self.st_dim, self.st_out,
               self.caps_params, self.caps_hidden, self.n_classes) < 1:
            raise ScaeError("OCAE sizes must be >= 1")


@dataclass(frozen=True)
class OptimConfig:
    """TF1-style RMSProp (baselines.scae.optim) or torch's Adam."""

    name: str = "rmsprop_tf"  # "rmsprop_tf" or "adam"
    lr: float = 1e-4
    decay: float = 0.9  # RMSProp's rho
    momentum: float = 0.9
    eps: float | None = None  # None: SCAE's 1e-2 / batch_size ** 2

    def validate(self) -> None:
        if self.name not in ("rmsprop_tf", "adam"):
            raise ScaeError(f"optimizer must be rmsprop_tf or adam, got {self.name!r}")
        if self.lr <= 0:
            raise ScaeError("lr must be > 0")


@dataclass(frozen=True)
class FlowPartsConfig:
    """Where FlowSCAE's part capsules come from: a FlowCapsules checkpoint."""

    checkpoint: str = "checkpoints/flowcaps_geo_quick.pt"
    sha256: str = ""  # filled when the run starts; load refuses a different file
    n_parts: int = 0  # K of that checkpoint, filled when the run starts
    n_features: int = 0  # numbers per part fed to the OCAE besides the pose
    presence_area: float = 0.005  # visible share of the image at which a part counts as present


@dataclass(frozen=True)
class SCAEConfig:
    """`kind` "scae": PCAE + OCAE on images; "flowscae": an OCAE on FlowCapsules' parts."""

    kind: str = "scae"
    pcae: PCAEConfig = field(default_factory=PCAEConfig)
    ocae: OCAEConfig = field(default_factory=OCAEConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    # How long and where a run trains: the shared loop's settings, the budget in `loop.steps`
    # of `loop.batch_size` samples (every profile sets it), `loop.max_minutes` only a guard.
    loop: LoopConfig = field(default_factory=lambda: LOOP)
    parts: FlowPartsConfig = field(default_factory=FlowPartsConfig)

    def validate(self) -> None:
        if self.kind not in ("scae", "flowscae"):
            raise ScaeError(f"kind must be scae or flowscae, got {self.kind!r}")
        for part in (self.pcae, self.ocae, self.optim):
            part.validate()
        loop = self.loop
        if loop.batch_size < 1:
            raise ScaeError("batch_size must be >= 1")
        if loop.steps is None or loop.steps < 1:
            raise ScaeError(f"steps (the budget) must be >= 1, got {loop.steps}; max_minutes "
                            f"is only a guard")
        if loop.max_minutes is not None and loop.max_minutes <= 0:
            raise ScaeError(f"max_minutes (a guard; None: none) must be > 0, got "
                            f"{loop.max_minutes}")
        if self.kind == "flowscae" and self.parts.n_parts < 1:
            raise ScaeError("a flowscae config needs parts.n_parts (set from its checkpoint)")

    def replace(self, **groups: dict[str, Any] | Any) -> "SCAEConfig":
        """A copy with fields replaced; a dict value updates that group's fields (a loop field
        may be named alone: `seed`)."""
        return replaced(self, groups, ScaeError)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "SCAEConfig":
        raw = json_object(text, ScaeError)
        if not isinstance(raw.get("kind"), str):
            raise ScaeError("not an SCAE config (it names no kind)")
        run = raw.pop("run", None)
        if isinstance(run, dict):  # older configs: the loop's settings in a group of their own
            run = {**run, "max_minutes": run.get("max_minutes") or None}  # 0 was no guard
            raw = {**nest_loop(run, LOOP, RENAMED), **raw}
        return build(SCAEConfig, raw, ScaeError)


# The shared loop's settings of every SCAE run unless a profile says otherwise. No loss guard
# (explode_factor None): the loss is a negative log-likelihood, no ratio to a median means
# anything. No budget: every profile sets its steps.
LOOP = LoopConfig(out="runs/scae", seed=0, batch_size=32, steps=None, threads=0,
                  explode_factor=None, log_every=50, checkpoint_minutes=5.0)
# Names of loop settings in configs stored before the loop had its own field.
RENAMED = {"max_steps": "steps"}


# --- profiles -------------------------------------------------------------------------------

# The CPU quick profile of each model on Geo; every other profile is a `replace` of it.
# SCAE: 9,000 steps of 32 images, about 24 minutes of training on a 2-core CPU.
BASE_SCAE = SCAEConfig(
    kind="scae",
    pcae=PCAEConfig(),
    ocae=OCAEConfig(),
    # SCAE's run script's rate: at 1e-4 the quick run collapsed after 3,700 steps (docs).
    optim=OptimConfig(lr=3e-5),
    loop=dataclasses.replace(LOOP, batch_size=32, steps=9_000, threads=2),
)
# FlowSCAE: 32,000 steps of 128 part sets, about 12 minutes of training on a 2-core CPU.
BASE_FLOWSCAE = SCAEConfig(
    kind="flowscae",
    ocae=OCAEConfig(),
    optim=OptimConfig(lr=3e-4),
    loop=dataclasses.replace(LOOP, batch_size=128, steps=32_000, threads=2),
)
# The gpu profile's steps of 128 (not measured: no GPU has run either model; estimates of 10
# minutes of an H100, docs/baselines/scae.md). FlowSCAE's tiny step is bound by the GPU's
# per-step overhead, not its FLOPs, so it keeps the quick profile's steps.
GPU_STEPS = {"scae": 12_000, "flowscae": 32_000}

FLOWCAPS_CHECKPOINTS = {"geo": "checkpoints/flowcaps_geo_quick.pt",
                        "geo+": "checkpoints/flowcaps_geoplus_quick.pt"}


def _for_dataset(cfg: SCAEConfig, dataset: str) -> SCAEConfig:
    if dataset not in FLOWCAPS_CHECKPOINTS:
        raise ScaeError(f"unknown dataset {dataset!r}; choose from geo, geo+")
    if cfg.kind == "scae":
        # the FlowCapsules paper's change to SCAE: coloured templates on Geo, textured on Geo+
        return cfg.replace(pcae={"templates": "coloured" if dataset == "geo" else "textured"})
    return cfg.replace(parts={"checkpoint": FLOWCAPS_CHECKPOINTS[dataset]})


def profile(kind: str, name: str, dataset: str = "geo") -> SCAEConfig:
    """The named profile ("smoke", "quick", "gpu") of "scae" or "flowscae" on a dataset."""
    base = {"scae": BASE_SCAE, "flowscae": BASE_FLOWSCAE}.get(kind)
    if base is None:
        raise ScaeError(f"unknown model kind {kind!r}")
    if name == "quick":
        cfg = base
    elif name == "smoke":
        # a few dozen steps at 32 px: the contract test's end-to-end check of the quick model
        cfg = base.replace(pcae={"image_size": 32, "n_parts": 4, "template_size": 8,
                                 "enc_channels": (16, 16, 16, 16)},
                           ocae={"n_objects": 4, "st_out": 32, "caps_hidden": 32},
                           loop={"batch_size": 8, "steps": 12, "threads": 1, "log_every": 4})
    elif name == "gpu":
        cfg = base.replace(loop={"batch_size": 128, "steps": GPU_STEPS[kind], "threads": 0})
    else:
        raise ScaeError(f"{kind} has no profile {name!r} (smoke, quick, gpu)")
    return _for_dataset(cfg, dataset)
