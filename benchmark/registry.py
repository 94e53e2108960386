"""The method registry: one small protocol, one prediction dataclass, one plain dict.

Letters: B batch, K capsules (parts), K' maps of an extra, F feature size, H = W image side.

A method (FlowCapsules or a baseline) is a class with a `name` (the command-line key), a
`title` (its table column or row) and the functions `config`, `train`, `load`, `predict` and
`embed` (the cheap path to `Prediction.features`), plus the class attributes of
`METHOD_DEFAULTS` (its profiles and their time budgets, what ground truth it sees at test time,
whether its masks are amodal, which paper tables it fills, its training clip length, its own
`flowbench` commands, and, for a method that trains through the shared loop, its bench subject
and its loop case). It registers
with `@register`; the module that holds it is imported by `benchmark/methods/__init__.py` (one
explicit import per adapter), and `flowbench` (`bench` included), the tables and the contract
tests then see it with no other change. The metrics only ever see a `Prediction`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from benchmark import profiles
from benchmark.errors import BenchmarkError
from geogen.schema import SLOTS

if TYPE_CHECKING:
    from benchmark.bench import Subject


@dataclass(frozen=True)
class Axes:
    """Table 3's ablation axes. In a `TrainSpec`, None means "the method's default";
    in a record, the values the run really used (None where a method has no such axis)."""

    num_capsules: int | None = None  # K
    shape_dim: int | None = None  # |s|
    decoder_depth: int | None = None
    depth_ordering: bool | None = None

    def tag(self) -> str:
        """A short file-name tag for the non-default axes, '' when none is set."""
        parts = []
        if self.num_capsules is not None:
            parts.append(f"K{self.num_capsules}")
        if self.shape_dim is not None:
            parts.append(f"s{self.shape_dim}")
        if self.decoder_depth is not None:
            parts.append(f"dec{self.decoder_depth}")
        if self.depth_ordering is not None:
            parts.append("depth" if self.depth_ordering else "nodepth")
        return "-".join(parts)


@dataclass(frozen=True)
class TrainSpec:
    """Everything a method needs to train one run; built once by the runner."""

    dataset: str  # a geogen variant: "geo", "geo+", "articulated"
    profile: str  # a name in benchmark.profiles.PROFILES
    seed: int  # the run seed, derived from (seed, method, dataset)
    data_root: Path  # the training data: clips of the method's `clip_frames` frames
    run_dir: Path
    image_size: int  # side of the dataset's images
    device: str = "auto"
    variant: Axes = field(default_factory=Axes)
    # The training pairs of the datasets the method's `trains_with` names for this one, by
    # dataset (their profile folders); empty for most runs.
    extra_data: dict[str, Path] = field(default_factory=dict)
    # The S slot names of the training data, from its manifest (the runner reads them); a
    # method sizes its groups or slots by them. Geo's three for a spec built without data.
    slots: tuple[str, ...] = SLOTS


# float32 rounding of a normalised map (a softmax share, a sum of shares) may pass 1 by an ulp
VISIBLE_SLACK = 1e-5


@dataclass(frozen=True)
class Prediction:
    """What every method returns for a batch of frame pairs.

    masks: (B, K, H, W) float in [0, 1], amodal part masks Lambda_k.
    visible: (B, K, H, W) float in [0, 1], visibility Lambda+_k, normalised by the method
        (its adapter says how: the layering's share of each pixel, EM responsibilities, a
        map over its own maximum); the metrics threshold each map at 1/2 as given, so a
        method whose maps overlap gets overlapping masks. A method without layering may
        pass its masks.
    flow: (B, 2, H, W) float pixels (dx, dy) from frame 0 to frame 1 on frame 0's grid
        (geogen.schema's `flow` convention), or None where a method predicts no flow.
    features: (B, F) float, the vector the k-means protocol clusters (each method
        documents which numbers it holds).
    extras: named per-image maps, each (B, K', H, W) float in [0, 1], that `flowbench show`
        draws as extra rows (a method's own intermediate maps); no metric reads them.
    """

    masks: np.ndarray
    visible: np.ndarray
    flow: np.ndarray | None
    features: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    def check(self, batch: int, size: int) -> None:
        """Raise BenchmarkError if the arrays break the contract above."""
        if self.masks.ndim != 4 or self.masks.shape[0] != batch or self.masks.shape[2:] != (size, size):
            raise BenchmarkError(f"masks must be (B={batch}, K, {size}, {size}), got {self.masks.shape}")
        if self.visible.shape != self.masks.shape:
            raise BenchmarkError(f"visible {self.visible.shape} must match masks {self.masks.shape}")
        if self.flow is not None and self.flow.shape != (batch, 2, size, size):
            raise BenchmarkError(f"flow must be ({batch}, 2, {size}, {size}), got {self.flow.shape}")
        if self.features.ndim != 2 or self.features.shape[0] != batch:
            raise BenchmarkError(f"features must be (B={batch}, F), got {self.features.shape}")
        if not (np.isfinite(self.masks).all() and np.isfinite(self.visible).all()
                and np.isfinite(self.features).all()):
            raise BenchmarkError("prediction holds NaN or inf values")
        if self.visible.min() < 0 or self.visible.max() > 1 + VISIBLE_SLACK:
            raise BenchmarkError(f"visible must hold values in [0, 1] (each method normalises "
                                 f"its own maps), got {self.visible.min():.3g} to "
                                 f"{self.visible.max():.3g}")
        for name, maps in self.extras.items():
            if maps.ndim != 4 or maps.shape[0] != batch or maps.shape[2:] != (size, size):
                raise BenchmarkError(f"extras[{name!r}] must be (B={batch}, K', {size}, {size}), "
                                     f"got {maps.shape}")
            if not (np.isfinite(maps).all() and maps.min() >= 0 and maps.max() <= 1):
                raise BenchmarkError(f"extras[{name!r}] must hold values in [0, 1]")


@dataclass(frozen=True)
class LoadedModel:
    """A trained model and what its checkpoint says about itself."""

    model: Any
    config: dict[str, Any]  # the model's configuration, JSON-ready
    axes: Axes  # the Table 3 axes it was built with (None where not applicable)
    image_size: int  # the image side it expects
    # What the checkpoint says of its own training (its train config, pairs seen, ...), recorded
    # beside the metrics so that an evaluation of a given checkpoint keeps its provenance;
    # None when the checkpoint holds no such thing.
    trained_with: dict[str, Any] | None = None


# A loop case's data: LOOP_ROWS rows in batches of LOOP_BATCH, so 4 steps an epoch (a run of 8
# steps is two epochs, and an interrupt at step 5 falls inside the second).
LOOP_ROWS, LOOP_BATCH = 16, 4


@dataclass(frozen=True)
class LoopCase:
    """A tiny run of a method's trainer through the shared loop (trainloop.fit), on fixed data of
    LOOP_ROWS rows: what tests/test_trainloop_methods.py checks for every method that has one
    (resume, the NaN stop, the resume rule)."""

    task: type  # the method's trainloop.Task class (the test patches its step to fail on cue)
    config: Callable[[Path, int], Any]  # (out, steps) -> the method's config for a run of `steps`
    fit: Callable[..., Path]  # (config, meta=None) -> the model's path, trained on the fixed data
    error: type[Exception]  # the method's own error, which the loop's errors become
    changed: Callable[[Any], Any]  # config -> the same with one field a resume refuses changed
    field: str  # that field's dotted name, as the refusal names it


class Method(Protocol):
    """The protocol every registered method follows (the attributes below `title` have the
    defaults of METHOD_DEFAULTS, filled in by `register` where a class leaves them out)."""

    name: str
    title: str
    # Profiles the method supports, each with a human-readable time budget for one seed (data,
    # training and evaluation), e.g. {"quick": "about 25 minutes on a 2-core CPU"}. Every method
    # supports "smoke" (the contract test: seconds) and "quick" (CPU, at most 30 minutes).
    budgets: dict[str, str]
    # Ground truth beyond the images that the method sees at TEST time: () or ("flow",). The
    # runner passes `gt_flow` to predict only when "flow" is here; records and tables say so.
    uses_ground_truth: tuple[str, ...]
    amodal: bool  # whether Prediction.masks are amodal (False: visible-only masks)
    tables: tuple[int, ...]  # the paper's tables it fills: 1 segmentation, 2 clustering
    clip_frames: int  # frames per training clip; evaluation always uses the 2-frame test pairs
    # Whether k-means standardises each feature first (benchmark.clustering). False where the
    # method's own protocol clusters its features as they are (SCAE's object-capsule presences).
    standardise_features: bool
    # Per dataset, other datasets whose training pairs (the same profile's) the method also
    # trains on, e.g. {"geo+": ("geo",)}; the runner makes them and passes them in
    # TrainSpec.extra_data, and the record names them. Test pairs are always the dataset's own.
    trains_with: dict[str, tuple[str, ...]]
    # Its training step for `flowbench bench` (benchmark.bench), or None where it has none of its
    # own: (profile, settings) -> (the step in eager float32, the step as the profile trains it
    # where that differs, compiled or bf16, else None). `settings` are the bench's `--set
    # KEY=VALUE` items, which a method reads as its own `train --set` does or ignores.
    bench_subjects: Callable[[str, tuple[str, ...]], tuple[Subject, Subject | None]] | None
    # () -> its LoopCase, or None where it has no training of its own.
    loop_case: Callable[[], LoopCase] | None
    # click commands of a tool for this method alone, kept beside its adapter; `flowbench` adds
    # them when it starts.
    commands: tuple[Any, ...]
    # Whether its training uses every GPU its process sees, one DDP rank each (FlowCapsules,
    # through torchrun); a Slurm job of several GPUs for any other method is refused.
    multi_gpu: bool

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        """The full training configuration for a spec, JSON-ready (checked before any work)."""

    # Train (resuming from spec.run_dir when a run is there) and return the checkpoint; or None
    # for a method that trains nothing (a calibration): the runner then scores `untrained`'s
    # model, with no checkpoint and no training data, and such a method fills no Table 2.
    train: Callable[[TrainSpec], Path] | None

    def load(self, checkpoint: Path) -> LoadedModel:
        """Load a trained model; raise BenchmarkError for a missing or foreign checkpoint."""

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        """img0, img1: (B, 3, H, W) float32 in [0, 1]; parts of img0, flow img0 -> img1.

        gt_flow: (B, 2, H, W) float32 ground-truth flow img0 -> img1 in pixels (dx, dy,
        geogen.schema's convention), given only to methods whose `uses_ground_truth` has "flow";
        every method accepts the keyword.
        """

    def embed(self, model: Any, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        """(B, F) features of img0, equal to `predict(...).features` but cheaper; `gt_flow` as
        for `predict` (the k-means protocol embeds training pairs the same way)."""

    def axes(self, spec: TrainSpec) -> Axes:
        """Table 3's axes a spec trains with (its variant over the method's defaults), which
        `flowbench ablate` reads; default (METHOD_DEFAULTS) no axes at all."""

    def record_extras(self, loaded: LoadedModel, data_root: Path) -> dict[str, Any]:
        """Method-specific findings a record stores under "extras" (JSON-ready), computed from
        the evaluated model and the dataset; default (METHOD_DEFAULTS) none."""


def _no_axes(self: Any, spec: TrainSpec) -> Axes:
    return Axes()


def _no_extras(self: Any, loaded: LoadedModel, data_root: Path) -> dict[str, Any]:
    return {}


METHOD_DEFAULTS: dict[str, Any] = {
    "budgets": {"smoke": "seconds (the contract test's tiny profile)",
                "quick": "not stated by the method"},
    "uses_ground_truth": (),
    "amodal": True,
    "tables": (1, 2),
    "clip_frames": 2,
    "standardise_features": True,
    "trains_with": {},
    "axes": _no_axes,
    "record_extras": _no_extras,
    "bench_subjects": None,
    "loop_case": None,
    "commands": (),
    "multi_gpu": False,
}
GROUND_TRUTH = ("flow",)  # what `uses_ground_truth` may name
TABLES = (1, 2)  # what `tables` may name (Table 3 is FlowCapsules' own ablations)

METHODS: dict[str, Method] = {}

# The package whose __init__ imports every adapter module (one explicit import each): importing
# it registers every method. Nothing is discovered by globbing.
METHODS_PACKAGE = "benchmark.methods"


def register(cls: type) -> type:
    """Class decorator: check the class, fill in the defaults it leaves out, instantiate it
    and file it under its name. A bad declaration fails at import, naming the method."""
    for key, value in METHOD_DEFAULTS.items():
        if not hasattr(cls, key):
            setattr(cls, key, value)
    inst = cls()
    _check_declaration(inst)
    if inst.name in METHODS:
        raise ValueError(f"method {inst.name!r} registered twice")
    METHODS[inst.name] = inst
    return cls


def unregister(name: str) -> None:
    """Remove a method (tests register toy methods and take them out again)."""
    METHODS.pop(name, None)


def _check_declaration(m: Any) -> None:
    where = f"method {getattr(m, 'name', '?')!r}"
    if not isinstance(getattr(m, "name", None), str) or not m.name:
        raise ValueError(f"{where}: name must be a non-empty string")
    unknown = set(m.budgets) - set(profiles.PROFILES)
    if unknown or not {"smoke", "quick"} <= set(m.budgets):
        raise ValueError(f"{where}: budgets must name known profiles and include smoke and "
                         f"quick; got {sorted(m.budgets)}")
    if not set(m.uses_ground_truth) <= set(GROUND_TRUTH):
        raise ValueError(f"{where}: uses_ground_truth may name {GROUND_TRUTH}, "
                         f"got {m.uses_ground_truth}")
    if not set(m.tables) <= set(TABLES):
        raise ValueError(f"{where}: tables may name {TABLES}, got {m.tables}")
    if not isinstance(m.clip_frames, int) or m.clip_frames < 2:
        raise ValueError(f"{where}: clip_frames must be an integer >= 2, got {m.clip_frames}")
    if not hasattr(m, "train"):
        raise ValueError(f"{where}: train must be a method or None")
    if m.train is None and 2 in m.tables:
        raise ValueError(f"{where}: a method that trains nothing (train = None) has no learned "
                         f"features to cluster: tables may not name 2")
    if not isinstance(m.multi_gpu, bool):
        raise ValueError(f"{where}: multi_gpu must be a bool, got {m.multi_gpu!r}")
    if not isinstance(m.standardise_features, bool):
        raise ValueError(f"{where}: standardise_features must be a bool, "
                         f"got {m.standardise_features!r}")
    from geogen.schema import VARIANTS
    tw = m.trains_with
    if not isinstance(tw, dict) or any(
            d not in VARIANTS or not isinstance(others, tuple)
            or any(o not in VARIANTS or o == d for o in others) for d, others in tw.items()):
        raise ValueError(f"{where}: trains_with must map a dataset to a tuple of other datasets "
                         f"({', '.join(VARIANTS)}), got {tw!r}")
    for hook in ("train", "bench_subjects", "loop_case"):
        if getattr(m, hook) is not None and not callable(getattr(m, hook)):
            raise ValueError(f"{where}: {hook} must be a method or None")


def untrained(method: Method, spec: TrainSpec) -> LoadedModel:
    """The model of a method that trains nothing (`train` None): its config for the spec."""
    cfg = method.config(spec)
    return LoadedModel(model=cfg, config=cfg, axes=method.axes(spec), image_size=spec.image_size)


def load_methods() -> dict[str, Method]:
    """Import the adapters (once) and return the registry."""
    importlib.import_module(METHODS_PACKAGE)
    return METHODS


def get_method(name: str) -> Method:
    methods = load_methods()
    if name not in methods:
        known = ", ".join(sorted(methods)) or "none"
        raise BenchmarkError(f"unknown method {name!r}; registered methods: {known}")
    return methods[name]


def check_profile(method: Method, profile: str) -> None:
    """BenchmarkError unless the profile exists and the method states a budget for it."""
    profiles.get_profile(profile)  # unknown -> BenchmarkError
    if profile not in method.budgets:
        offered = [p for p in profiles.visible() if p in method.budgets]
        raise BenchmarkError(f"{method.name} does not support profile {profile!r}; it supports "
                             f"{', '.join(offered)}")


def check_gpus(method: Method, gpus: int) -> None:
    """BenchmarkError for a job of several GPUs that the method would train on one of."""
    if gpus > 1 and not method.multi_gpu:
        raise BenchmarkError(f"{method.name} trains on one GPU: --gpus {gpus} would leave "
                             f"{gpus - 1} idle; pass --gpus 1 (only methods that train one rank "
                             f"per GPU, such as flowcaps, take more)")
