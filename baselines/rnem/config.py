"""Typed configs of the R-NEM model and its trainer, their JSON round trip, and the profiles.

Every profile is `BASE.replace(...)`: the paper's settings where this project can afford them,
and the changes written out in each profile. `docs/baselines/rnem.md` says where each setting
comes from (the R-NEM paper, its official code, or a probe here) and why any one differs.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from baselines.rnem.errors import RnemError
from trainloop.configs import build, json_object, nest_loop, replaced
from trainloop.loop import LoopConfig

DEVICES = ("cpu", "cuda", "auto")
PRIORS = ("fixed", "median")
COLOURS = ("group", "pixel", "image")
# Configs written before these fields: no warm-up, the fixed prior, no E-step epsilon, one
# colour per group, no background group.
_BEFORE_FIELDS = {"warmup": 0, "prior": "fixed", "e_epsilon": 0.0, "colour": "group",
                  "background_group": False}


@dataclass(frozen=True)
class ModelConfig:
    """The network and the EM iterations. Sizes are the official code's unless noted."""

    image_size: int = 64  # side of the data's images
    work_size: int = 64  # side the model sees: images are area-downsampled to it
    # K: R-NEM's objects plus one spare (5 for its 4 balls); with the white prior Geo's objects
    # are three shapes and a background that is not the prior's colour (`groups_for`).
    num_groups: int = 5
    enc_channels: tuple[int, ...] = (16, 32, 64)  # 4x4 convs, stride 2, layer norm, ELU
    enc_hidden: int = 512  # the encoder's fully connected layer
    state_size: int = 250  # theta_k, the recurrent state of a group
    rel_hidden: int = 250  # the relational cell's encoder, core and context layers
    att_hidden: int = 100  # the attention branch's hidden layer
    dec_hidden: int = 512  # the decoder's first fully connected layer
    # Fixed standard deviation of the Gaussian pixel likelihood, in the E-step and the loss
    # (N-EM's e_sigma, a temperature). Under Adam the loss's scale does not matter; the
    # E-step's does: the widest sigma at which the untrained EM loop does not shrink the
    # groups' differences (N-EM's 0.25 shrinks them ~3.5x a step, docs/baselines/rnem.md).
    sigma: float = 0.07
    # The pixel prior's mean, which the KL term pulls every group towards outside its share and
    # which is each group's first prediction: "fixed" is `prior_mean` in every channel (the
    # official's 0 is the balls' black background); "median" is each clip's background colour,
    # the per-channel median of its first frame, so that, as in the official, no group must
    # take the background (docs/baselines/rnem.md: with a fixed white prior one group takes the
    # background and every shape with it).
    prior: str = "fixed"
    # Added to every group's density in the E-step (the official `compute_em_probabilities`'s
    # 1e-6): a pixel that no group predicts is shared by all instead of going to the least
    # wrong one, so the group on Geo's background no longer takes every shape; but the same
    # sharp E-step on those pixels is what keeps the untrained groups apart, and with 1e-6 the
    # untrained loop loses them (docs/baselines/rnem.md). 0: the plain softmax, the default.
    e_epsilon: float = 0.0
    prior_mean: float = 1.0
    # The decoder's colour: "group" draws one colour c_k per group through its mask; "pixel"
    # a colour at every pixel (three more output channels of the mask's last layer), a free
    # image per group as the official decoder's, still drawn through the mask over the prior
    # so that the first predictions sit near it; "image" the official's own output, a sigmoid
    # per pixel and channel and no mask (the first predictions are grey, sigmoid(0)).
    colour: str = "group"
    # The prior as a fixed extra component of the E-step, beside the K learned groups (the
    # official's "a group at the prior explains the background", made explicit): with the
    # median prior it holds the background, so no learned group can take it and paint its
    # colour over the shapes. gamma then keeps the K learned groups' responsibilities, which
    # sum to 1 minus the background's.
    background_group: bool = False
    em_steps: int = 1  # E: EM iterations per frame (each frame is shown E times): R-NEM's 1
    # W: extra EM steps on the first frame, against itself, before the clip runs; a test pair
    # reads frame 0 after them (with E = 1 the clip's first step already predicts frame 1).
    warmup: int = 2
    # gamma's random start is drawn on an n x n grid and resized to the work side, so each group
    # starts with a few smooth blobs of the image; 0 draws it per pixel (the official code).
    init_grid: int = 4
    # Every group's mask starts near this value (the mask layer's bias), so the first
    # predictions lie near the prior, as the official's initial prediction does; a start at
    # 1/2 puts every prediction far from it and the first updates wash the groups out.
    mask_init: float = 0.1

    def validate(self) -> None:
        if self.num_groups < 2:
            raise RnemError(f"num_groups must be >= 2 (the relational cell pairs groups), "
                            f"got {self.num_groups}")
        n = len(self.enc_channels)
        if n < 1 or self.work_size % (2 ** n) or self.work_size < 2 ** n:
            raise RnemError(f"work_size {self.work_size} must be a multiple of {2 ** n} "
                            f"(one halving per encoder layer)")
        if self.image_size % self.work_size:
            raise RnemError(f"image_size {self.image_size} must be a multiple of work_size "
                            f"{self.work_size}")
        if self.colour not in COLOURS:
            raise RnemError(f"colour must be one of {COLOURS}, got {self.colour!r}")
        if self.prior not in PRIORS:
            raise RnemError(f"prior must be one of {PRIORS}, got {self.prior!r}")
        if not 0 <= self.e_epsilon < 1:
            raise RnemError(f"e_epsilon must be in [0, 1), got {self.e_epsilon}")
        if self.sigma <= 0:
            raise RnemError(f"sigma must be > 0, got {self.sigma}")
        if not 0 < self.mask_init < 1:
            raise RnemError(f"mask_init must be in (0, 1), got {self.mask_init}")
        if self.init_grid < 0 or self.init_grid > self.work_size:
            raise RnemError(f"init_grid must be in [0, work_size], got {self.init_grid}")
        if self.em_steps < 1 or self.warmup < 0 or self.em_steps + self.warmup < 2:
            raise RnemError(f"em_steps must be >= 1, warmup >= 0 and em_steps + warmup >= 2 "
                            f"(frame 0 is read after a step whose target is frame 0), got "
                            f"{self.em_steps} and {self.warmup}")


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    # The shared loop's settings: the budget is at most `loop.steps` steps of `batch_size`
    # clips, fewer when early stopping ends the run (R-NEM's 500 epochs are never reached);
    # `loop.max_minutes` only a guard. Early stopping (R-NEM's): the validation loss every
    # `loop.eval_every` steps (None: once an epoch), stop after `loop.patience` evaluations
    # without a new best, export the best weights.
    loop: LoopConfig = field(default_factory=lambda: LOOP)
    clip_frames: int = 10  # T: frames per training clip (fewer if the data has fewer)
    max_clips: int | None = None  # read at most this many training clips
    lr: float = 1e-3  # Adam, fixed
    noise_prob: float = 0.2  # masked-uniform corruption of the input frames
    val_clips: int = 1000  # validation clips read (0: no validation, no early stopping)

    def validate(self) -> None:
        self.model.validate()
        loop = self.loop
        if loop.device not in DEVICES:
            raise RnemError(f"device must be one of {DEVICES}, got {loop.device!r}")
        if self.clip_frames < 2:
            raise RnemError(f"clip_frames must be >= 2, got {self.clip_frames}")
        if loop.batch_size < 1 or self.lr <= 0 or loop.steps is None or loop.steps < 1:
            raise RnemError("batch_size and max_steps must be >= 1 and lr > 0")
        if not 0 <= self.noise_prob < 1:
            raise RnemError(f"noise_prob must be in [0, 1), got {self.noise_prob}")
        if loop.max_minutes is not None and loop.max_minutes <= 0:
            raise RnemError(f"max_minutes (a guard) must be > 0 or None, got {loop.max_minutes}")
        if self.val_clips < 0 or (loop.eval_every is not None and loop.eval_every < 1) or (
                loop.patience is not None and loop.patience < 1):
            raise RnemError("val_clips must be >= 0, eval_every and patience >= 1 (or None)")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        raw = json_object(text, RnemError)
        model = raw.pop("model", {})
        if isinstance(model, dict):  # what a field missing from an older config meant then
            model = {**_BEFORE_FIELDS, **model}
        raw = nest_loop(raw, LOOP, RENAMED)  # older configs: the loop's settings flat
        return build(cls, {**raw, "model": model}, RnemError)

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed; `model` and `loop` may be dicts of their fields'
        changes, and a loop field may be named alone (`seed`)."""
        return replaced(self, changes, RnemError)


# The shared loop's settings of R-NEM's training: batches of 64 clips until early stopping
# (patience 10); the step budget is only a ceiling every profile lowers.
LOOP = LoopConfig(out="runs/rnem", seed=0, batch_size=64, steps=10_000_000, explode_factor=50.0,
                  log_every=20, checkpoint_minutes=2.0, patience=10)
# Names of loop settings in configs stored before the loop had its own field.
RENAMED = {"max_steps": "steps"}


def groups_for(parts: int, background_group: bool = False) -> int:
    """K for data of `parts` moving parts: a group each and R-NEM's one spare, and one for the
    background (not the prior's colour) unless the prior is a fixed background group; Geo's
    three shapes give 4 learned groups beside the background group (5 without it)."""
    return parts + (1 if background_group else 2)


# The official training at the official side, batch, K and schedule (one EM step per frame
# after a 2-step warm-up, 10-frame clips, early stopping after 10 epochs without a better
# validation loss), with the changes that the R-NEM docs give for colour: the prior at each
# clip's background colour and held by a fixed background group, so that the K learned groups
# are R-NEM's objects plus one spare; a colour per pixel drawn through a mask over the prior;
# a smooth random start.
BASE = TrainConfig(model=ModelConfig(prior="median", background_group=True, colour="pixel",
                                     num_groups=groups_for(3, background_group=True)))

# Long, on one CPU core (one thread, so that another run can have the other): BASE for at most
# 1,500 steps of 64 clips, about 150 minutes of training there (under 3 hours with the data and
# evaluation). An epoch of 30k clips is more than the budget, so the validation loss is taken
# every 150 steps on 256 clips; 30k clips at 64 px are 3.7 GB in memory.
LONG = BASE.replace(loop={"steps": 1_500, "eval_every": 150, "threads": 1}, max_clips=30_000,
                    val_clips=256)

# Quick: gives up the 64 px side and the batch of 64 (32 px and 16: four times the updates per
# minute) and keeps everything else; at most 2,800 steps of 16 clips, about 20 minutes of
# training on one core (30 with the clip data, loading and evaluation).
QUICK = BASE.replace(model={"work_size": 32},
                     loop={"batch_size": 16, "steps": 2_800, "eval_every": 200, "threads": 1},
                     val_clips=200)

PROFILES: dict[str, TrainConfig] = {
    # The contract test's: the quick model scaled down, a few steps at 32 px, one thread.
    "smoke": QUICK.replace(model={"image_size": 32, "enc_hidden": 64, "state_size": 32,
                                  "rel_hidden": 32, "att_hidden": 16, "dec_hidden": 64},
                           loop={"batch_size": 8, "steps": 4, "threads": 1, "log_every": 1,
                                 "eval_every": 2},
                           val_clips=8),
    "quick": QUICK,
    "long": LONG,
    # One GPU: BASE, early stopping once an epoch; at most 20,000 steps of 64 clips. Not
    # measured (no GPU has run it): an estimate of an hour of an H100 (docs/baselines/rnem.md).
    "gpu": BASE.replace(loop={"steps": 20_000}),
}


def profile(name: str, out: str) -> TrainConfig:
    """The named profile's config writing to `out`."""
    if name not in PROFILES:
        raise RnemError(f"rnem has no profile {name!r} (profiles: {', '.join(PROFILES)})")
    return PROFILES[name].replace(loop={"out": out})
