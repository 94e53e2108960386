"""The data contract: every key, dtype, shape and convention of a Geo/Geo+ shard.

The writer (`geogen.shards`), the reader (`geogen.dataset`), the metrics and the
README all read this module; nothing else defines a field.

Letters: N samples, T frames per clip, S slots (Geo's 3 shapes, or a variant's parts),
H = W = image side.

Conventions
- The slots are the variant's: Geo's (and Geo+'s) are the fixed order circle, square,
  triangle (index 0, 1, 2), and its depth order is the same (the circle at the back, the
  triangle in front). A variant with other slots (the articulated figure's ten parts) names
  them in the manifest's `slots` and stores its per-sample depth order in `depth`; a manifest
  without `slots` has Geo's three (`slots_of`), so every Geo folder stays as it was.
- Image coordinates: x is the column, y the row, in pixels; pixel (x, y) covers
  [x, x+1) x [y, y+1) and its centre is (x + 0.5, y + 0.5).
- `flow` is forward flow from frame t to t+1 in pixels, (dx, dy): the point seen at
  pixel (x, y) of frame t is at (x + dx, y + dy) in frame t+1, with (x, y) the pixel
  centre. It is the analytic motion of the slot that `visible` names at that pixel,
  0 on the background.
- `flow_bw` is the same from t+1 back to t, on frame t+1's grid.
- `visible` is 0 on the background and s + 1 where slot s is the front-most slot
  whose `amodal` mask holds the pixel, so `visible` always lies inside `amodal`.
- An `amodal` pixel is inside when at least half of its area is covered, the area measured
  with SS x SS subsamples (`--supersample`). With an even SS many edge pixels are exactly half
  covered (one in four along an edge that follows a row or column): inside by this rule, and
  drawn exactly half-way between the shape's colour and what lies behind, so the image does
  not say on which side of the pixel centre the edge runs (experiments/2026-11-27-pose-refinement).
- `pose` is (centre x, centre y, angle, size): centre in pixels; angle in radians,
  rotating offsets (ox, oy) to (ox cos a - oy sin a, ox sin a + oy cos a) in (x, y)
  pixel coordinates (with y pointing down, a positive angle turns clockwise on
  screen); size in pixels (circle diameter, square side, triangle side).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

SCHEMA_VERSION = 1

SLOTS: tuple[str, ...] = ("circle", "square", "triangle")   # Geo's slots
S = len(SLOTS)
BACKGROUND = 0  # value of `visible` on the background; slot s is s + 1

# The presence pattern is drawn as an integer 0..9 (PSD's generator):
# 0 -> circle only, 1-2 -> circle + triangle, 3-4 -> circle + square, 5-9 -> all three.
# The class id (`label`) numbers these four patterns; it is the clustering target.
CLASSES: tuple[str, ...] = ("circle", "circle+triangle", "circle+square", "circle+square+triangle")
CLASS_PRESENCE: tuple[tuple[bool, bool, bool], ...] = (
    (True, False, False),
    (True, False, True),
    (True, True, False),
    (True, True, True),
)
CLASS_PRIOR: tuple[float, ...] = (0.1, 0.2, 0.2, 0.5)
SPLITS: tuple[str, ...] = ("train", "val", "test")
VARIANTS: tuple[str, ...] = ("geo", "geo+", "articulated", "articulated+")   # `geogen make`'s
# Import-only variants: folders converted from other formats (`geogen import-psd`); same
# shards and readers, never generated.
IMPORT_VARIANTS: tuple[str, ...] = ("psd",)
MIN_SIZE, MAX_SIZE = 32, 512
# The variants that texture their slots on photographs (`--backgrounds`, `--textures`, `--look`).
PHOTO_VARIANTS: tuple[str, ...] = ("geo+", "articulated+")
# Their looks (`geogen make --look`, the manifest's `config.look`): "paper" is the paper's Geo+,
# greyscale Brodatz-style textures as they are; "camouflage" tints greyscale textures and adds
# colour crops of the background photographs themselves (harder, beyond the paper).
LOOKS: tuple[str, ...] = ("paper", "camouflage")
DEFAULT_LOOK = "paper"
# A photo variant's manifest without `look` was made before looks existed, in what is now the
# camouflage look (docs/data.md).
UNRECORDED_LOOK = "camouflage"


def slots_of(manifest: dict) -> tuple[str, ...]:
    """The slot names of a generated folder: its manifest's `slots`, else Geo's three."""
    return tuple(manifest.get("slots", SLOTS))


def look_of(manifest: dict) -> str | None:
    """The look of a generated folder's textures (LOOKS); None for a variant without any."""
    if manifest.get("variant") not in PHOTO_VARIANTS:
        return None
    return str((manifest.get("config") or {}).get("look", UNRECORDED_LOOK))


def classes_of(manifest: dict) -> tuple[str, ...]:
    """The class names that `label` numbers in a folder: its manifest's `classes`, else Geo's."""
    return tuple(manifest.get("classes", CLASSES))


def class_of_draw(draw: int) -> int:
    """Map PSD's presence draw (0..9) to the class id."""
    if draw == 0:
        return 0
    if draw <= 2:
        return 1
    if draw <= 4:
        return 2
    return 3


@dataclass(frozen=True)
class Field:
    dtype: np.dtype
    shape: Callable[[int, int, int], tuple[int, ...]]  # (T, H, S) -> per-sample shape
    doc: str
    required: bool = True


FIELDS: dict[str, Field] = {
    "frames": Field(np.dtype(np.uint8), lambda T, H, S: (T, H, H, 3), "RGB frames"),
    "flow": Field(np.dtype(np.float32), lambda T, H, S: (T - 1, H, H, 2),
                  "forward flow t -> t+1 in pixels, (dx, dy), on frame t's grid"),
    "flow_bw": Field(np.dtype(np.float32), lambda T, H, S: (T - 1, H, H, 2),
                     "backward flow t+1 -> t in pixels, (dx, dy), on frame t+1's grid"),
    "amodal": Field(np.dtype(bool), lambda T, H, S: (T, S, H, H),
                    "full silhouette of each slot, occlusion ignored; all False if absent"),
    "visible": Field(np.dtype(np.uint8), lambda T, H, S: (T, H, H),
                     "0 background, s+1 where slot s is the front-most"),
    "present": Field(np.dtype(bool), lambda T, H, S: (S,), "which slots are in the scene"),
    "label": Field(np.dtype(np.int64), lambda T, H, S: (), "presence class id, see CLASSES"),
    "pose": Field(np.dtype(np.float32), lambda T, H, S: (T, S, 4),
                  "centre x, centre y (pixels), angle (radians), size (pixels)"),
    # Geo+ and articulated+: which source images a sample drew, for auditing (-1 where none).
    "bg_source": Field(np.dtype(np.int32), lambda T, H, S: (), "index of the background image", False),
    "tex_source": Field(np.dtype(np.int32), lambda T, H, S: (S,), "index of each slot's texture", False),
    # Articulated and articulated+: the kinematic tree's state (geogen.figure).
    "joint_angle": Field(np.dtype(np.float32), lambda T, H, S: (T, S),
                         "each part's angle relative to its parent's (radians; the root's "
                         "is its angle on the image)", False),
    "depth": Field(np.dtype(np.uint8), lambda T, H, S: (S,),
                   "each slot's drawing rank, 0 at the back (visible names the front-most)",
                   False),
}

REQUIRED_FIELDS: tuple[str, ...] = tuple(k for k, f in FIELDS.items() if f.required)

# Attributes every shard carries (HDF5 file attributes).
SHARD_ATTRS: tuple[str, ...] = (
    "variant", "split", "seed", "size", "frames", "generator_version", "schema_version",
    "config", "first_index", "count",
)
# The seed is stored as an HDF5 attribute, which holds at most an unsigned 64-bit integer.
MAX_SEED = 2**64 - 1

# What a field that a folder lacks holds (`geogen import-psd`: the manifest's import.absent
# names them): amodal all False, pose and flow_bw NaN, visible 0, present False, label -1.
ABSENT: dict[str, object] = {"amodal": False, "pose": np.nan, "visible": 0, "present": False,
                             "label": -1, "flow_bw": np.nan}


def sample_shape(name: str, frames: int, size: int, slots: int = S) -> tuple[int, ...]:
    return FIELDS[name].shape(frames, size, slots)


def check_sample(sample: dict[str, np.ndarray], frames: int, size: int, slots: int = S) -> None:
    """Raise ValueError if a sample's arrays do not follow the contract."""
    for name in REQUIRED_FIELDS:
        if name not in sample:
            raise ValueError(f"missing field {name!r}")
    for name, arr in sample.items():
        if name not in FIELDS:
            raise ValueError(f"unknown field {name!r}")
        arr = np.asarray(arr)
        spec = FIELDS[name]
        want = spec.shape(frames, size, slots)
        if arr.shape != want or arr.dtype != spec.dtype:
            raise ValueError(
                f"field {name!r}: got {arr.dtype}{list(arr.shape)}, want {spec.dtype}{list(want)}")


# The values of the data: what `geogen verify` and the reader (`geogen.dataset`) accept.

KNOWN_VARIANTS: tuple[str, ...] = VARIANTS + IMPORT_VARIANTS


@dataclass(frozen=True)
class Bounds:
    """What a folder's values may be, read from its manifest (`bounds_of`)."""
    slots: int                    # S: `visible` holds 0..S, `depth` a permutation of 0..S-1
    classes: int                  # `label` holds 0..classes-1
    images: dict[str, int]        # bg_source / tex_source -> images in that bank (if recorded)
    absent: frozenset[str]        # fields the folder lacks: they hold ABSENT's values


def manifest_problems(manifest: dict) -> list[str]:
    """What in a manifest's variant, slots and classes breaks the contract (empty: none)."""
    if not isinstance(manifest, dict):
        return [f"is not a JSON object ({type(manifest).__name__})"]
    problems = []
    variant = manifest.get("variant")
    if variant not in KNOWN_VARIANTS:
        problems.append(f"names variant {variant!r}, which geogen neither makes nor imports "
                        f"(known: {', '.join(KNOWN_VARIANTS)})")
    for key, names in (("slots", manifest.get("slots", SLOTS)),
                       ("classes", manifest.get("classes", CLASSES))):
        ok = (isinstance(names, (list, tuple)) and names
              and all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names))
        if not ok:
            problems.append(f"malformed {key} {names!r} (want distinct non-empty names)")
    # `visible` (uint8) names slot s as s + 1.
    if isinstance(manifest.get("slots"), list) and len(manifest["slots"]) > 255:
        problems.append(f"{len(manifest['slots'])} slots; visible (uint8) names at most 255")
    return problems


def bounds_of(manifest: dict) -> Bounds:
    """The value bounds of a folder whose manifest has no `manifest_problems`."""
    sources = manifest.get("sources") or {}
    images = {field: int(sources[bank]["count"])
              for field, bank in (("bg_source", "backgrounds"), ("tex_source", "textures"))
              if isinstance(sources.get(bank), dict) and "count" in sources[bank]}
    absent = (manifest.get("import") or {}).get("absent") or {}
    return Bounds(len(slots_of(manifest)), len(classes_of(manifest)), images,
                  frozenset(name for name in absent if name in ABSENT))


def has_value_rules(name: str, bounds: Bounds) -> bool:
    """Whether `value_problem` can find anything wrong with field `name` (frames, amodal and
    present hold any value of their dtype)."""
    return name in bounds.absent or FIELDS[name].dtype.kind == "f" or name in _RANGES


def value_problem(name: str, values: np.ndarray, bounds: Bounds, row0: int = 0) -> str | None:
    """What is wrong with the values of field `name` (None: nothing), given rows (n, ...) of it
    (a frame picked or not); the message names the first bad row, counted from `row0`.

    A block's sum, min or max is enough when it is good; only a bad block is searched by row."""
    values = np.asarray(values)
    if values.size == 0:
        return None
    if name in bounds.absent:
        fill = ABSENT[name]
        bad = ~np.isnan(values) if fill is np.nan else values != fill
        return _first(bad, values, row0, f"is absent from this folder, so all {fill}, "
                                          f"but holds {{}}") if bad.any() else None
    if values.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            total = values.sum()   # one pass: a NaN or inf makes it NaN or inf
        if not np.isfinite(total):
            bad = ~np.isfinite(values)
            if bad.any():   # else the sum of finite values overflowed
                return _first(bad, values, row0, "holds {}")
    if name == "pose" and values[..., 3].min() <= 0:   # sizes are pixels (circle diameter, ...)
        return _first(values[..., 3] <= 0, values[..., 3], row0, "holds a size {} <= 0")
    if name in _RANGES:
        lo, hi, why = _RANGES[name](bounds)
        if values.min() < lo or values.max() > hi:
            return _first((values < lo) | (values > hi), values, row0,
                          f"holds {{}}, outside {lo}..{hi} ({why})")
    if name == "depth":
        order = np.sort(values.reshape(len(values), -1), axis=1)     # (n, S)
        bad = order != np.arange(order.shape[1])
        if bad.any():
            return _first(bad.any(1), values, row0, "holds {} for its slots, not an order of "
                                                    "them (each rank 0..S-1 once)")
    return None


_MANY = 2**31 - 1  # an image bank the manifest does not count
_RANGES = {  # field -> bounds -> (lowest, highest, why)
    "label": lambda b: (0, b.classes - 1, "the folder's classes"),
    "visible": lambda b: (BACKGROUND, b.slots, f"{BACKGROUND} the background, s + 1 for slot s"),
    "depth": lambda b: (0, b.slots - 1, "a drawing rank per slot"),
    "bg_source": lambda b: (0, b.images.get("bg_source", _MANY) - 1,
                            "the background images in its manifest"),
    "tex_source": lambda b: (-1, b.images.get("tex_source", _MANY) - 1,
                             "-1 for an absent slot, else the textures in its manifest"),
}


def _first(bad: np.ndarray, values: np.ndarray, row0: int, what: str) -> str:
    """`what` with the first bad value and its row: `bad` is (n, ...) like `values` (each value
    judged alone) or (n,) (each row judged whole, shown whole)."""
    row = int(np.flatnonzero(bad.reshape(len(bad), -1).any(1))[0])
    if bad.shape != values.shape:
        shown = values[row].tolist()
    else:
        shown = np.asarray(values[row])[np.asarray(bad[row])].flat[0].item()
    return f"{what.format(shown)} at sample {row0 + row}"
