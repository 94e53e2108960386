"""The method registry: one small protocol, one prediction dataclass, one plain dict.

Letters: B batch, K capsules (parts), F feature size, H = W image side.

A method (FlowCapsules or a baseline) is a class with a `name` (the command-line
key), a `title` (the table column) and the functions `config`, `train`, `load`,
`predict` and `embed` (the cheap path to `Prediction.features`). It
registers with `@register`; `flowbench`, the tables and the contract test then see
it with no other change. The metrics only ever see a `Prediction`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from benchmark.errors import BenchmarkError

PROFILES: tuple[str, ...] = ("quick", "long", "gpu", "paper")
HIDDEN_PROFILES: tuple[str, ...] = ("smoke",)  # tiny, for tests and end-to-end checks


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

    dataset: str  # "geo" or "geo+"
    profile: str  # "quick", "long", "gpu", "paper" or "smoke"
    seed: int  # the run seed, derived from (seed, method, dataset)
    data_root: Path
    run_dir: Path
    image_size: int  # side of the dataset's images
    device: str = "auto"
    variant: Axes = field(default_factory=Axes)


@dataclass(frozen=True)
class Prediction:
    """What every method returns for a batch of frame pairs.

    masks: (B, K, H, W) float in [0, 1], amodal part masks Lambda_k.
    visible: (B, K, H, W) float >= 0, visibility Lambda+_k (normalised over k by the
        metrics; a method without layering may pass its masks).
    flow: (B, 2, H, W) float pixels (dx, dy) from frame 0 to frame 1 on frame 0's grid
        (geogen.schema's `flow` convention), or None where a method predicts no flow.
    features: (B, F) float, the vector the k-means protocol clusters (each method
        documents which numbers it holds).
    """

    masks: np.ndarray
    visible: np.ndarray
    flow: np.ndarray | None
    features: np.ndarray

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
        if not (np.isfinite(self.masks).all() and np.isfinite(self.features).all()):
            raise BenchmarkError("prediction holds NaN or inf values")


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


class Method(Protocol):
    """The protocol every registered method follows."""

    name: str
    title: str

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        """The full training configuration for a spec, JSON-ready (checked before any work)."""

    def train(self, spec: TrainSpec) -> Path:
        """Train (resuming from spec.run_dir when a run is there); return the checkpoint."""

    def load(self, checkpoint: Path) -> LoadedModel:
        """Load a trained model; raise BenchmarkError for a missing or foreign checkpoint."""

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray) -> Prediction:
        """img0, img1: (B, 3, H, W) float32 in [0, 1]; parts of img0, flow img0 -> img1."""

    def embed(self, model: Any, img0: np.ndarray) -> np.ndarray:
        """(B, F) features of img0, equal to `predict(...).features` but cheaper."""


METHODS: dict[str, Method] = {}

# Modules that register methods when imported; listed, not discovered by globbing.
METHOD_MODULES: tuple[str, ...] = ("benchmark.methods.flowcaps", "benchmark.methods.rnem",
                                  "baselines.registry")


def register(cls: type) -> type:
    """Class decorator: instantiate the method and file it under its name."""
    inst = cls()
    if inst.name in METHODS:
        raise ValueError(f"method {inst.name!r} registered twice")
    METHODS[inst.name] = inst
    return cls


def load_methods() -> dict[str, Method]:
    """Import the method modules (once) and return the registry."""
    for module in METHOD_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            # Only a module that does not exist yet is skipped (baselines may have none);
            # a broken import inside an existing module still raises.
            if err.name != module:
                raise
    return METHODS


def get_method(name: str) -> Method:
    methods = load_methods()
    if name not in methods:
        known = ", ".join(sorted(methods)) or "none"
        raise BenchmarkError(f"unknown method {name!r}; registered methods: {known}")
    return methods[name]
