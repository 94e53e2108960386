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

DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class ModelConfig:
    """The network and the EM iterations. Sizes are the official code's unless noted."""

    image_size: int = 64  # side of the data's images
    work_size: int = 64  # side the model sees: images are area-downsampled to it
    num_groups: int = 4  # K: three shapes and the background, one group each
    enc_channels: tuple[int, ...] = (16, 32, 64)  # 4x4 convs, stride 2, layer norm, ELU
    enc_hidden: int = 512  # the encoder's fully connected layer
    state_size: int = 250  # theta_k, the recurrent state of a group
    rel_hidden: int = 250  # the relational cell's encoder, core and context layers
    att_hidden: int = 100  # the attention branch's hidden layer
    dec_hidden: int = 512  # the decoder's first fully connected layer
    # Fixed standard deviation of the Gaussian pixel likelihood, in the E-step and the loss
    # (N-EM's e_sigma). Under Adam the loss's scale does not matter; the E-step's does.
    sigma: float = 0.25
    # Mean of the pixel prior that the KL term pulls towards, and each group's first prediction:
    # white, as Geo's backgrounds are 181-255 in every channel (the official 0 suits black ones).
    prior_mean: float = 1.0
    em_steps: int = 3  # E: EM iterations per frame (each frame is shown E times)
    # gamma's random start is drawn on an n x n grid and resized to the work side, so each group
    # starts with a few smooth blobs of the image; 0 draws it per pixel (the official code).
    init_grid: int = 4

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
        if self.sigma <= 0:
            raise RnemError(f"sigma must be > 0, got {self.sigma}")
        if self.init_grid < 0 or self.init_grid > self.work_size:
            raise RnemError(f"init_grid must be in [0, work_size], got {self.init_grid}")
        if self.em_steps < 2:
            raise RnemError(f"em_steps must be >= 2 (a frame is read after a step whose target "
                            f"is that frame), got {self.em_steps}")


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    seed: int = 0
    out: str = "runs/rnem"
    device: str = "auto"
    threads: int = 0  # CPU threads; 0 = all cores
    clip_frames: int = 4  # T: frames per training clip (fewer if the data has fewer)
    max_clips: int | None = None  # read at most this many training clips
    batch_size: int = 64
    lr: float = 1e-3  # Adam, fixed
    noise_prob: float = 0.2  # masked-uniform corruption of the input frames
    grad_clip: float | None = None
    max_steps: int = 10000
    max_minutes: float | None = None  # training time budget; None = max_steps only
    checkpoint_minutes: float = 2.0
    log_every: int = 20
    explode_factor: float = 50.0  # loss above this many times its running median -> stop

    def validate(self) -> None:
        self.model.validate()
        if self.device not in DEVICES:
            raise RnemError(f"device must be one of {DEVICES}, got {self.device!r}")
        if self.clip_frames < 2:
            raise RnemError(f"clip_frames must be >= 2, got {self.clip_frames}")
        if self.batch_size < 1 or self.lr <= 0 or self.max_steps < 1:
            raise RnemError("batch_size and max_steps must be >= 1 and lr > 0")
        if not 0 <= self.noise_prob < 1:
            raise RnemError(f"noise_prob must be in [0, 1), got {self.noise_prob}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise RnemError(f"max_minutes must be > 0, got {self.max_minutes}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise RnemError(f"train config is not valid JSON: {err}") from None
        if not isinstance(raw, dict):
            raise RnemError("train config must be a JSON object")
        raw = dict(raw)
        model = _build(ModelConfig, raw.pop("model", {}))
        return _build(cls, {**raw, "model": model})

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed; `model` may be a dict of model-field changes."""
        changes = _tuples(changes)
        model = changes.pop("model", None)
        if isinstance(model, dict):
            try:
                model = dataclasses.replace(self.model, **_tuples(model))
            except TypeError as err:
                raise RnemError(f"unknown model config field: {err}") from None
        if model is not None:
            changes["model"] = model
        try:
            return dataclasses.replace(self, **changes)
        except TypeError as err:
            raise RnemError(f"unknown config field: {err}") from None


def _tuples(raw: dict[str, Any]) -> dict[str, Any]:
    # JSON gives lists; the dataclasses hold tuples so they stay hashable and frozen.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}


def _build(cls: type, raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise RnemError(f"{cls.__name__} must be a JSON object")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(raw) - names
    if unknown:
        raise RnemError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    return cls(**_tuples(raw))


# The official network and loss at the official side and batch, with the changes that the R-NEM
# docs give for colour (white prior, one colour and a mask per group, smooth random start).
BASE = TrainConfig()

# The quick profile: 32 px work side and batch 16 for updates in a CPU budget, 4-frame clips;
# 20 minutes of training leave room for the clip data, loading and evaluation in 30.
QUICK = BASE.replace(model={"work_size": 32}, batch_size=16, clip_frames=4, max_minutes=20.0,
                     max_steps=1_000_000)

PROFILES: dict[str, TrainConfig] = {
    # The contract test's: the quick model scaled down, a few steps at 32 px, one thread.
    "smoke": QUICK.replace(model={"image_size": 32, "enc_hidden": 64, "state_size": 32,
                                  "rel_hidden": 32, "att_hidden": 16, "dec_hidden": 64},
                           batch_size=8, max_steps=4, max_minutes=None, threads=1, log_every=1),
    "quick": QUICK,
    # One GPU: the quick model with the official batch, 10 minutes (untested: no GPU here).
    "gpu": QUICK.replace(batch_size=64, max_minutes=10.0),
}


def profile(name: str, out: str) -> TrainConfig:
    """The named profile's config writing to `out`."""
    if name not in PROFILES:
        raise RnemError(f"rnem has no profile {name!r} (profiles: {', '.join(PROFILES)})")
    return PROFILES[name].replace(out=out)
