"""Scene sampling: a Geo scene's parameters and per-frame poses, drawn from one numpy Generator.

Follows PSD's shape generator (Xu et al. 2019, `data_generator.py`), written with lengths
relative to the image side L so that any `size` gives the same distribution:
- background: each RGB channel uniform in 181..255;
- three colours with one dominant channel each (low channels 0..74, high 181..255),
  shuffled among circle, square and triangle;
- sizes uniform in [0.2 L, 0.3 L) (circle diameter, square side, triangle side);
- the circle's centre is the image centre plus a per-axis offset uniform in [-0.2 L, 0.2 L);
  the square's and triangle's centres are the circle's centre plus their own offsets;
- hierarchical motion per frame: circle (m, m), square circle + (0, v), triangle circle + (h, 0),
  with m, v, h uniform in [-0.1 L, 0.1 L);
- presence from a draw of 0..9 (see `schema.class_of_draw`).
PSD draws integers on a 512 canvas; we draw continuous values, the same ranges.

Motion (`MOTIONS`): "translation" is the above (the paper's data; every angle 0, sizes fixed).
"conformal" adds, per slot, a constant per-frame angle change w uniform in [-ROTATION_RANGE,
ROTATION_RANGE) rad and log-scale change g uniform in [-LOG_SCALE_RANGE, LOG_SCALE_RANGE),
drawn after all the translation numbers (so the translation stream, i.e. Geo, is unchanged).
The motion stays hierarchical: the circle turns by w0 t and scales by exp(g0 t) about its own
centre, and carries the square's and triangle's offsets with it (each child's centre is the
circle's centre plus exp(g0 t) R(w0 t) offset plus its own translation (0, v) t or (h, 0) t);
on top of that each child turns and scales about its own centre, angle (w0 + ws) t and size
size_s exp((g0 + gs) t). Every slot's pose is thus a similarity per frame, which the renderer
turns into exact masks and flow. With w = g = 0 this is exactly the translation motion.

Every parameter is drawn for every slot whatever the presence, so the stream layout (and hence
each sample) does not depend on which slots end up present.

Letters: T frames, S = 3 slots (circle, square, triangle).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from geogen import schema

# Ranges as fractions of the image side L (PSD: 512 canvas, sizes int(.2*512)..int(.3*512), ...).
SIZE_RANGE = (0.2, 0.3)
OFFSET_RANGE = 0.2
MOTION_RANGE = 0.1
# Conformal motion, per frame: angle change in radians (~11 degrees at most) and log-scale
# change (sizes change by at most ~10% a frame), small enough that a 2-frame pair stays a
# plausible motion and large enough that rotation and scale are measurable at 32 px.
ROTATION_RANGE = 0.2
LOG_SCALE_RANGE = 0.1
MOTIONS: tuple[str, ...] = ("translation", "conformal")
# Colour channel ranges (PSD: randint(75) for a low channel, 255 - randint(75) for a high one).
LOW_MAX = 75    # low channel in 0..74
HIGH_MIN = 181  # high channel in 181..255


@dataclass(frozen=True)
class Scene:
    """One sample's parameters. Absent slots keep their drawn poses but render as nothing."""
    pose: np.ndarray        # (T, S, 4) float32: centre x, centre y, angle, size (pixels)
    present: np.ndarray     # (S,) bool
    label: int              # presence class id (schema.CLASSES)
    colours: np.ndarray     # (S, 3) uint8 flat colour of each slot
    background: np.ndarray  # (3,) uint8 flat background colour
    extra: dict = field(default_factory=dict)   # optional schema fields (e.g. Geo+ sources)
    # The shape of each slot (geogen.render.signed_distance: a Geo name or a shape object) and
    # the drawing order, back to front; Geo's are its slot names and slot order.
    kinds: tuple = schema.SLOTS
    order: tuple[int, ...] | None = None   # None: slot order


def _dominant_colours(rng: np.random.Generator) -> np.ndarray:
    """Three colours, one per dominant channel (blue, green, red as PSD lists them), shuffled."""
    low = rng.integers(0, LOW_MAX, size=(3, 3))         # (3, 3)
    high = rng.integers(HIGH_MIN, 256, size=3)           # (3,)
    colours = low.copy()
    colours[np.arange(3), np.array([2, 1, 0])] = high    # colour i is dominant in channel 2 - i
    return colours[rng.permutation(3)].astype(np.uint8)  # (S, 3)


def sample_geo_scene(rng: np.random.Generator, size: int, frames: int,
                     motion: str = "translation") -> Scene:
    """Draw one Geo scene (see the module docstring) with T = `frames` frames at side `size`
    and the given motion ("translation" or "conformal")."""
    if motion not in MOTIONS:
        raise ValueError(f"unknown motion {motion!r} (known: {', '.join(MOTIONS)})")
    L = float(size)
    colours = _dominant_colours(rng)                                      # (S, 3)
    background = rng.integers(HIGH_MIN, 256, size=3).astype(np.uint8)   # (3,)
    draw = int(rng.integers(0, 10))
    label = schema.class_of_draw(draw)
    present = np.array(schema.CLASS_PRESENCE[label], bool)              # (S,)

    sizes = rng.uniform(*SIZE_RANGE, size=3) * L                          # (S,)
    offsets = rng.uniform(-OFFSET_RANGE, OFFSET_RANGE, size=(3, 2)) * L   # (S, 2)
    m, v, h = rng.uniform(-MOTION_RANGE, MOTION_RANGE, size=3) * L

    centre0 = np.empty((3, 2))                                            # (S, 2)
    centre0[0] = L / 2 + offsets[0]
    centre0[1:] = centre0[0] + offsets[1:]   # square and triangle hang off the circle
    velocity = np.array([[m, m], [m, m + v], [m + h, m]])                 # (S, 2) pixels/frame

    t = np.arange(frames, dtype=np.float64)[:, None, None]               # (T, 1, 1)
    pose = np.zeros((frames, 3, 4))                                       # (T, S, 4)
    pose[..., :2] = centre0[None] + t * velocity[None]
    pose[..., 3] = sizes[None]
    if motion == "conformal":
        _add_conformal(rng, pose, centre0)
    return Scene(pose=pose.astype(np.float32), present=present, label=label,
                 colours=colours, background=background)


# The variants whose scenes this module draws (geogen.variants): `own_motions` holds for them
# under translation motion.
GEO_SCENE_VARIANTS: tuple[str, ...] = ("geo", "geo+")


def own_motions(pose: np.ndarray) -> np.ndarray:
    """Poses (N, T, S, 4) of translation-motion scenes -> (N, S): the one number per part that
    the generator draws for its own motion, per frame: the circle's m, the square's v, the
    triangle's h (module docstring). What a model that gives each part a latent dimension of
    its own (PSD) should encode; read from frames 0 and 1."""
    vel = pose[:, 1, :, :2].astype(np.float64) - pose[:, 0, :, :2]     # (N, S, 2) pixels
    return np.stack([vel[:, 0, 0], vel[:, 1, 1] - vel[:, 0, 1], vel[:, 2, 0] - vel[:, 0, 0]],
                    -1)                                                  # (N, S)


def _add_conformal(rng: np.random.Generator, pose: np.ndarray, centre0: np.ndarray) -> None:
    """Turn translation poses (T, S, 4) into conformal ones in place (module docstring)."""
    turn = rng.uniform(-ROTATION_RANGE, ROTATION_RANGE, size=3)           # (S,) rad per frame
    grow = rng.uniform(-LOG_SCALE_RANGE, LOG_SCALE_RANGE, size=3)         # (S,) log-size per frame
    t = np.arange(pose.shape[0], dtype=np.float64)                        # (T,)
    a0, k0 = turn[0] * t + 0.0, np.exp(grow[0] * t)   # (T,) circle's turn and scale; no -0.0
    offsets = centre0[1:] - centre0[0]                                    # (2, 2) children at t = 0
    c, s = np.cos(a0)[:, None], np.sin(a0)[:, None]                       # (T, 1)
    # R(a) o = (ox cos a - oy sin a, ox sin a + oy cos a) (schema's angle convention).
    carried = np.stack([c * offsets[:, 0] - s * offsets[:, 1],
                        s * offsets[:, 0] + c * offsets[:, 1]], -1)       # (T, 2, 2)
    # A child's translation-only centre is circle + offset + own motion; swap the fixed offset
    # for the carried one.
    pose[:, 1:, :2] += k0[:, None, None] * carried - offsets[None]
    pose[:, 0, 2] = a0
    pose[:, 0, 3] *= k0
    pose[:, 1:, 2] = (turn[0] + turn[1:])[None] * t[:, None]              # (T, 2)
    pose[:, 1:, 3] *= np.exp((grow[0] + grow[1:])[None] * t[:, None])     # (T, 2)
