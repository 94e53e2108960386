"""Variant registry: the CLI name ("geo", "geo+", "articulated", "articulated+") -> how a sample
is drawn and rendered.

A variant turns a sample's Generator and the run's config (a `geogen.make.MakeConfig`: size,
frames, motion, and whatever options the variant adds there) into a `Scene` plus an
`Appearance`; rendering, ground truth and storage are shared. Register a new one with
`@register("name")`; a variant that reads image sources also gives `sources(config)`, which
loads them (raising GeogenError for unusable folders) and returns the manifest's record of them.

Geo+ (FlowCapsules Sec. 5: natural backgrounds, textured shapes) draws exactly the Geo scene of
the same (seed, split, index) (shapes, sizes, motion, presence), then, from the same stream, a
background crop (`appearance.background`) and one texture per slot (`appearance.draw_texture`,
drawn for every slot so the stream does not depend on presence). The config's `look` picks the
bundled textures and whether greyscale ones are tinted (the paper's look by default; the same
draws in either, so a camouflage sample has the scene, crop and texture placement of the
paper-look sample of the same (seed, split, index)). The image banks are loaded,
shrunk and given mip pyramids once per process (`geo_plus_banks`, cached by its arguments):
the parent loads them before the worker pool forks, so workers inherit them.
Articulated+ is the same for the articulated figures: the figure of the same sample (so the
same poses, joint angles, depth order, masks and flow), then the background and one texture
per part from the same banks, drawn as Geo+ draws them (`_on_photograph`).

Letters: T frames, S slots, H = W = image side.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np

from geogen import appearance as looks
from geogen import figure, schema, sources
from geogen.errors import GeogenError
from geogen.render import Appearance, FlatAppearance, render_clip
from geogen.render_parts import render_parts
from geogen.scene import Scene, sample_geo_scene


@dataclass(frozen=True)
class Variant:
    name: str
    draw: Callable[[np.random.Generator, Any], tuple[Scene, Appearance]]  # (rng, config)
    extra_fields: tuple[str, ...] = ()   # optional schema fields it stores (from Scene.extra)
    sources: Callable[[Any], dict] | None = None   # config -> manifest record of its images
    slots: tuple[str, ...] = schema.SLOTS   # the S slot names, in slot order
    classes: tuple[str, ...] = schema.CLASSES   # what `label` numbers
    # Written into the manifest (with `slots` and `classes`) when the slots are not Geo's, so
    # a Geo folder's manifest stays byte for byte what it was.
    describe: dict | None = None

    @property
    def manifest_entries(self) -> dict:
        if self.slots == schema.SLOTS:
            return {}
        return {"slots": list(self.slots), "classes": list(self.classes), **(self.describe or {})}

    @property
    def fields(self) -> tuple[str, ...]:
        return schema.REQUIRED_FIELDS + self.extra_fields


REGISTRY: dict[str, Variant] = {}


def register(name: str, extra_fields: tuple[str, ...] = (),
             sources: Callable[[Any], dict] | None = None, slots: tuple[str, ...] = schema.SLOTS,
             classes: tuple[str, ...] = schema.CLASSES, describe: dict | None = None):
    def wrap(draw):
        REGISTRY[name] = Variant(name, draw, extra_fields, sources, slots, classes, describe)
        return draw
    return wrap


def get_variant(name: str) -> Variant:
    if name not in REGISTRY:
        known = ", ".join(sorted(REGISTRY))
        raise GeogenError(f"unknown variant {name!r} (known: {known})")
    return REGISTRY[name]


@register("geo")
def draw_geo(rng: np.random.Generator, config: Any) -> tuple[Scene, Appearance]:
    scene = sample_geo_scene(rng, config.size, config.frames, config.motion)
    return scene, FlatAppearance(scene.colours, scene.background)


@functools.lru_cache(maxsize=2)
def geo_plus_banks(backgrounds: str | None, textures: str | None, max_images: int | None,
                   size: int, skip_bad: bool = False, look: str = schema.DEFAULT_LOOK
                   ) -> tuple[sources.ImageBank, sources.ImageBank]:
    """(backgrounds, textures), shrunk for `size` and with mip pyramids; once per process.

    Folder images are shrunk as they are decoded (a large folder never sits in memory at full
    resolution); `max_images` keeps an evenly spaced subset of each folder. A background
    smaller than `size` is refused (it would be enlarged into a blur), as is a file that does
    not decode; `skip_bad` leaves such files out instead. `look` picks the bundled textures
    when `textures` is None (geogen.sources).
    """
    bg_side = looks.prepare_side(size)
    bg = sources.load_bank(backgrounds, "backgrounds", limit=max_images, min_side=bg_side,
                           smallest=size, skip_bad=skip_bad)
    tex = sources.load_bank(textures, "textures", limit=max_images,
                            min_side=looks.TextureConfig().work_side, skip_bad=skip_bad,
                            look=look)
    return looks.prepare_backgrounds(bg, size), looks.prepare_textures(tex)


def _plus_banks(config: Any) -> tuple[sources.ImageBank, sources.ImageBank]:
    return geo_plus_banks(config.backgrounds, config.textures, config.max_images, config.size,
                          config.skip_bad_images, config.look)


def _plus_sources(config: Any) -> dict:
    bg, tex = _plus_banks(config)
    return {"backgrounds": bg.describe(), "textures": tex.describe(),
            "background_config": asdict(looks.BackgroundConfig()),
            "texture_config": asdict(looks.texture_config(config.look))}


def _on_photograph(scene: Scene, rng: np.random.Generator,
                   config: Any) -> tuple[Scene, Appearance]:
    """A drawn scene textured on a photograph: from `rng`, after the scene's draws, a
    background crop, then a texture for every slot (present or not, so the stream does not
    depend on presence); the sources' indices join the scene's extra fields."""
    bg_bank, tex_bank = _plus_banks(config)
    image, bg_index = looks.background(bg_bank, rng, config.size)          # (H, W, 3)
    # Textures read the mip level of the shape's smallest size over the clip (no aliasing).
    cfg = looks.texture_config(config.look)
    fills = tuple(looks.draw_texture(tex_bank, rng, cfg,
                                     pixels_per_unit=float(scene.pose[:, s, 3].min()))
                  for s in range(len(scene.present)))
    tex = np.array([f.source if p else -1 for f, p in zip(fills, scene.present)], np.int32)  # (S,)
    scene = replace(scene, extra={**scene.extra, "bg_source": np.int32(bg_index),
                                  "tex_source": tex})
    return scene, looks.SampleAppearance(fills, image)


@register("geo+", extra_fields=("bg_source", "tex_source"), sources=_plus_sources)
def draw_geo_plus(rng: np.random.Generator, config: Any) -> tuple[Scene, Appearance]:
    return _on_photograph(sample_geo_scene(rng, config.size, config.frames, config.motion),
                          rng, config)


_FIGURE = {"slots": figure.PARTS, "classes": figure.CLASSES,
           "describe": {"parents": [figure.PARTS[i] if i >= 0 else None for i in figure.PARENT],
                        "groups": {k: list(v) for k, v in figure.GROUPS.items()}}}


@register("articulated", extra_fields=("joint_angle", "depth"), **_FIGURE)
def draw_articulated(rng: np.random.Generator, config: Any) -> tuple[Scene, Appearance]:
    scene = figure.sample_figure_scene(rng, config.size, config.frames, config.motion)
    return scene, FlatAppearance(scene.colours, scene.background)


@register("articulated+", extra_fields=("joint_angle", "depth", "bg_source", "tex_source"),
          sources=_plus_sources, **_FIGURE)
def draw_articulated_plus(rng: np.random.Generator, config: Any) -> tuple[Scene, Appearance]:
    scene = figure.sample_figure_scene(rng, config.size, config.frames, config.motion)
    return _on_photograph(scene, rng, config)


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
    # Shape objects (the figures' parts) render all at once; the same bytes, a fraction of
    # the calls (geogen.render_parts).
    objects = not any(isinstance(kind, str) for kind in scene.kinds)
    render = render_parts if objects else render_clip
    out = render(scene.pose, scene.present, appearance, config.size, config.supersample,
                 kinds=scene.kinds, order=scene.order)
    out["present"] = scene.present                       # (S,)
    out["label"] = np.int64(scene.label)                 # ()
    out["pose"] = scene.pose                             # (T, S, 4)
    out.update(scene.extra)
    return out
