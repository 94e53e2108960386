"""Variant registry: the CLI name ("geo"; "geo+" later) -> how a sample is drawn and rendered.

A variant turns a sample's Generator and the run's config (a `geogen.make.MakeConfig`: size,
frames, and whatever options the variant adds there) into a `Scene` plus an `Appearance`;
rendering, ground truth and storage are shared. Register a new one with `@register("name")`.

Letters: T frames, S slots, H = W = image side.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from geogen import schema
from geogen.errors import GeogenError
from geogen.render import Appearance, FlatAppearance, render_clip
from geogen.scene import Scene, sample_geo_scene


@dataclass(frozen=True)
class Variant:
    name: str
    draw: Callable[[np.random.Generator, Any], tuple[Scene, Appearance]]  # (rng, config)
    extra_fields: tuple[str, ...] = ()   # optional schema fields it stores (from Scene.extra)

    @property
    def fields(self) -> tuple[str, ...]:
        return schema.REQUIRED_FIELDS + self.extra_fields


REGISTRY: dict[str, Variant] = {}


def register(name: str, extra_fields: tuple[str, ...] = ()):
    def wrap(draw):
        REGISTRY[name] = Variant(name, draw, extra_fields)
        return draw
    return wrap


def get_variant(name: str) -> Variant:
    if name not in REGISTRY:
        known = ", ".join(sorted(REGISTRY))
        raise GeogenError(f"unknown variant {name!r} (known: {known})")
    return REGISTRY[name]


@register("geo")
def draw_geo(rng: np.random.Generator, config: Any) -> tuple[Scene, Appearance]:
    scene = sample_geo_scene(rng, config.size, config.frames)
    return scene, FlatAppearance(scene.colours, scene.background)


def sample_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """The sample's own stream, from (seed, split, index) alone: any sample can be made again."""
    ss = np.random.SeedSequence(seed, spawn_key=(schema.SPLITS.index(split), index))
    return np.random.Generator(np.random.PCG64(ss))


def make_sample(config: Any, split: str, index: int) -> dict[str, np.ndarray]:
    """Every schema field of sample `index` of `split` (per-sample shapes, schema dtypes).

    `config` is a `geogen.make.MakeConfig` (variant, seed, size, frames, supersample, ...).
    """
    rng = sample_rng(config.seed, split, index)
    scene, appearance = get_variant(config.variant).draw(rng, config)
    out = render_clip(scene.pose, scene.present, appearance, config.size, config.supersample)
    out["present"] = scene.present                       # (S,)
    out["label"] = np.int64(scene.label)                 # ()
    out["pose"] = scene.pose                             # (T, S, 4)
    out.update(scene.extra)
    return out
