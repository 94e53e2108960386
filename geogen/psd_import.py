"""Convert a folder in PSD's format into arrays that follow geogen.schema.

PSD ("Unsupervised Discovery of Parts, Structure, and Dynamics", Xu et al., ICLR 2019) writes
its shapes data as, for each sample id i: `{i}_im1.png`, `{i}_im2.png` (the two frames) and
`{i}_f.npy` (their flow), plus split lists (`demo.txt`, ...). Facts below were read from
PSD's public generator `data_generator.py`, its `utils.py` and its loader `data.py`
(github.com/zhenjia-xu/psd, commit 87edb60), and checked on its bundled demo data:
- Frames: 8-bit RGB PNGs, 128 x 128 (drawn at 512 and shrunk with bilinear resizing).
- `{i}_f.npy`: float32, shape (2, H, W), channel first; channel 0 is dx (along columns),
  channel 1 is dy (along rows); forward flow from im1 to im2 on im1's grid (a shape at
  offset o in im1 is at o + motion in im2); 0 on the background; in units of the image side
  (pixels at H x W divided by W), so pixels = value * W. Edge pixels hold a bilinear blend of
  the neighbouring flows, as the flow was resized like the image.
- Motion: the circle moves by (a, a) (equal x and y), the square by the circle's motion plus
  (0, m), the triangle by the circle's motion plus (m', 0); pure translations. Depth order is
  circle at the back, then square, then triangle: the same as our slot order.
- Colours: background light (each channel 255 - U{0..74}); the three shapes get one colour
  each of blue-dominant, green-dominant and red-dominant (dominant channel >= 181, others
  <= 74), shuffled over the shapes, so colour tells shapes apart but not which one is which.

What the conversion produces (T = 2 frames; letters N samples, H = W side, S slots):
- `frames` (N, 2, H, H, 3) and `flow` (N, 1, H, H, 2) in pixels, (dx, dy): always.
- Masks where the colours allow (a light background and dominant-channel colours): each pixel
  goes to the nearest of the sample's colour prototypes (background + one per shape), so
  blended edge pixels go to the side they resemble most. Which shape a colour is follows
  from the motion structure above (circle dx == dy, square shares the circle's dx, triangle
  its dy); when that is ambiguous (a zero relative motion) the fill ratio of the mask's
  bounding box breaks the tie (circle pi/4, square 1, triangle 1/2). From the masks:
  `visible`, `present`, `label`, and `flow_bw` (minus each shape's translation, on im2's
  grid; exact because PSD's motions are translations). Samples whose masks cannot be
  derived (a shape hidden in im1 but seen in im2, colours that do not match) are skipped
  and listed in `info["skipped"]`.
- Never derivable, so absent (listed in `info["absent"]`): `amodal` (occluded parts are not
  in the images) and `pose` (no exact centre under occlusion, no size). `placeholders`
  fills absent required fields with the schema's "absent" values for a writer.

`write_psd_shards(src, out)` stores the result as a normal shard folder (geogen.shards:
shards plus manifest.json, all samples in one split, `variant` "psd"); the manifest's
`import` entry carries `info`.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
from PIL import Image

from geogen import schema, shards
from geogen.errors import GeogenError

T = 2
_NAME = re.compile(r"^(\d+)_im1\.png$")
LIGHT_MIN = 150  # background prototype: every channel at least this (PSD draws >= 181)
DOMINANT_MIN, OTHER_MAX = 150, 110  # shape prototypes: one channel high, two low (PSD: 181, 74)
MIN_PIXELS = 4  # clean pixels a colour needs to count as a shape in a frame
FLOW_TOL = 0.05  # pixels: PSD's motions are integers at 512 px, i.e. steps of 0.25 px at 128
_RATIO = {0: np.pi / 4, 1: 1.0, 2: 0.5}  # mask area / bounding-box area: circle, square, triangle


def list_samples(src: Path) -> list[str]:
    """Sample ids with all three files, in numeric order; a missing partner is an error."""
    if not src.is_dir():
        raise GeogenError(f"PSD folder {src} does not exist or is not a folder")
    ids = sorted((m.group(1) for p in src.iterdir() if (m := _NAME.match(p.name))), key=int)
    if not ids:
        raise GeogenError(f"no PSD sample ({{i}}_im1.png, {{i}}_im2.png, {{i}}_f.npy) in {src}")
    for i in ids:
        for suffix in ("_im2.png", "_f.npy"):
            if not (src / f"{i}{suffix}").is_file():
                raise GeogenError(f"PSD sample {i} in {src} has no {i}{suffix}")
    return ids


def read_sample(src: Path, i: str) -> tuple[np.ndarray, np.ndarray]:
    """-> frames (2, H, H, 3) uint8, forward flow (H, H, 2) float32 in pixels, (dx, dy)."""
    frames = []
    for k in (1, 2):
        path = src / f"{i}_im{k}.png"
        try:
            with Image.open(path) as img:
                frames.append(np.asarray(img.convert("RGB")))
        except (OSError, ValueError, SyntaxError) as err:
            raise GeogenError(f"cannot read image {path}: {err}") from None
    path = src / f"{i}_f.npy"
    try:
        raw = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise GeogenError(f"cannot read flow {path}: {err}") from None
    h, w = frames[0].shape[:2]
    if frames[1].shape != frames[0].shape or h != w:
        raise GeogenError(f"PSD sample {i} in {src}: frames must be square and equal in size")
    if raw.shape != (2, h, w):
        raise GeogenError(f"flow {path} has shape {raw.shape}, want (2, {h}, {w})")
    if not np.isfinite(raw).all():
        raise GeogenError(f"flow {path} holds NaN or inf; a flow is finite everywhere (0 on "
                          f"the background)")
    # Channel-first (dx, dy) in image-side units -> channel-last pixels.
    flow = np.ascontiguousarray(raw.transpose(1, 2, 0).astype(np.float32) * w)  # (H, W, 2)
    return np.stack(frames), flow


def _prototypes(frame: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]] | None:
    """Background colour and {dominant channel: colour} from a frame's clean pixels."""
    px = frame.reshape(-1, 3).astype(np.int16)  # (H*W, 3)
    high = px >= DOMINANT_MIN
    light = px.min(axis=1) >= LIGHT_MIN
    if not light.any():
        return None
    shapes = {}
    one_high = (high.sum(axis=1) == 1) & (px.max(axis=1) >= DOMINANT_MIN)
    lows_ok = np.sort(px, axis=1)[:, 1] <= OTHER_MAX  # second-largest channel is low
    for ch in range(3):
        sel = one_high & lows_ok & high[:, ch]
        if sel.sum() >= MIN_PIXELS:
            shapes[ch] = np.median(px[sel], axis=0)
    return np.median(px[light], axis=0), shapes


def _labels(frame: np.ndarray, bg: np.ndarray, shapes: dict[int, np.ndarray]) -> np.ndarray:
    """(H, W) int: -1 background, else the dominant channel of the nearest prototype."""
    keys = [-1] + sorted(shapes)
    protos = np.stack([bg] + [shapes[k] for k in keys[1:]]).astype(np.float32)  # (P, 3)
    dist = ((frame[:, :, None, :].astype(np.float32) - protos) ** 2).sum(-1)  # (H, W, P)
    return np.asarray(keys)[dist.argmin(-1)]


def _assign(motion: dict[int, np.ndarray], ratio: dict[int, float]) -> tuple[dict[int, int], bool]:
    """Map colour -> slot from the motion structure; returns (mapping, used the geometry)."""
    colours = sorted(motion)
    patterns = [p for p in schema.CLASS_PRESENCE if sum(p) == len(colours)]
    candidates = []
    for pattern in patterns:
        slots = [s for s in range(schema.S) if pattern[s]]
        for perm in itertools.permutations(slots):
            m = dict(zip(colours, perm))
            inv = {s: c for c, s in m.items()}
            circle = motion[inv[0]]
            ok = abs(circle[0] - circle[1]) <= FLOW_TOL
            if 1 in inv:
                ok &= abs(motion[inv[1]][0] - circle[0]) <= FLOW_TOL
            if 2 in inv:
                ok &= abs(motion[inv[2]][1] - circle[1]) <= FLOW_TOL
            if ok:
                candidates.append(m)
    if not candidates:
        raise ValueError("the shapes' motions do not follow PSD's structure (a hidden circle?)")
    if len(candidates) == 1:
        return candidates[0], False
    cost = [sum(abs(ratio[c] - _RATIO[s]) for c, s in m.items()) for m in candidates]
    return candidates[int(np.argmin(cost))], True


def _fill_ratio(mask: np.ndarray) -> float:
    rows, cols = np.nonzero(mask)
    box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
    return float(mask.sum() / box)


def derive_masks(frames: np.ndarray, flow: np.ndarray) -> tuple[dict[str, np.ndarray], bool]:
    """One sample's visible (2, H, H), flow_bw (1, H, H, 2), present (S,), label ().

    Raises ValueError (with the reason) when the colours or motions do not allow it."""
    protos = [_prototypes(f) for f in frames]
    if protos[0] is None or protos[1] is None:
        raise ValueError("no light background")
    (bg1, shapes1), (bg2, shapes2) = protos
    if not shapes1:
        raise ValueError("no shape colour in im1")
    if not set(shapes2) <= set(shapes1):
        raise ValueError("a shape seen in im2 is hidden in im1 (its motion is unknown)")
    lab1 = _labels(frames[0], bg1, shapes1)  # (H, W)
    lab2 = _labels(frames[1], bg2, {c: shapes1[c] for c in shapes2})  # (H, W)
    # A shape's translation: the median over its pixels, robust to the blended edge flows.
    motion = {c: np.median(flow[lab1 == c], axis=0) for c in shapes1}  # colour -> (dx, dy)
    ratio = {c: _fill_ratio(lab1 == c) for c in shapes1}
    mapping, by_geometry = _assign(motion, ratio)
    visible = np.zeros((T,) + lab1.shape, np.uint8)  # (2, H, H)
    flow_bw = np.zeros(lab2.shape + (2,), np.float32)  # (H, H, 2)
    for colour, slot in mapping.items():
        visible[0][lab1 == colour] = slot + 1
        visible[1][lab2 == colour] = slot + 1
        flow_bw[lab2 == colour] = -motion[colour]  # pure translation: backward = minus forward
    present = np.zeros(schema.S, bool)
    present[list(mapping.values())] = True
    label = np.int64(schema.CLASS_PRESENCE.index(tuple(present.tolist())))
    return {"visible": visible, "flow_bw": flow_bw[None], "present": present,
            "label": label}, by_geometry


def convert_psd_folder(src, *, masks: bool = True) -> tuple[dict[str, np.ndarray], dict]:
    """Read every PSD sample in `src` -> (arrays with a leading N axis, info).

    `arrays` holds `frames`, `flow` and, when `masks` and the colours allow, `visible`,
    `flow_bw`, `present`, `label`. `info` says what was derived, what is absent and why,
    and which samples were skipped.
    """
    src = Path(src)
    ids = list_samples(src)
    frames, flows, derived, kept, skipped = [], [], [], [], []
    by_geometry = 0
    for i in ids:
        f, fl = read_sample(src, i)
        if frames and f.shape != frames[0].shape:
            raise GeogenError(f"PSD sample {i} in {src} is {f.shape[1]} px, not {frames[0].shape[1]}")
        if masks:
            try:
                d, geo = derive_masks(f, fl)
            except ValueError as err:
                skipped.append({"id": i, "reason": str(err)})
                continue
            derived.append(d)
            by_geometry += geo
        frames.append(f)
        flows.append(fl)
        kept.append(i)
    size = int(np.shape(frames[0])[1]) if frames else 0
    if masks and not kept:
        raise GeogenError(f"no sample in {src} has PSD's colours: convert without masks")
    arrays = {"frames": np.stack(frames),  # (N, 2, H, H, 3)
              "flow": np.stack(flows)[:, None]}  # (N, 1, H, H, 2)
    absent = {"amodal": "occluded parts are not in PSD's images",
              "pose": "PSD stores no pose; centres are not exact under occlusion"}
    if masks:
        for key in derived[0]:
            arrays[key] = np.stack([d[key] for d in derived])
    else:
        for key in ("visible", "flow_bw", "present", "label"):
            absent[key] = "masks not derived (masks=False)"
    info = {"source": str(src.resolve()), "format": "psd", "count": len(kept), "size": size,
            "frames": T, "ids": kept, "masks": bool(masks), "skipped": skipped,
            "masks_by_geometry": by_geometry, "absent": absent}
    return arrays, info


def placeholders(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A copy with every absent required field filled with its "absent" value
    (`schema.ABSENT`: amodal all False, pose NaN, visible 0, present False, label -1, flow_bw
    NaN). `info["absent"]` says which fields these are."""
    out = dict(arrays)
    n, size = arrays["frames"].shape[0], arrays["frames"].shape[2]
    for name in schema.REQUIRED_FIELDS:
        if name not in out:
            spec = schema.FIELDS[name]
            out[name] = np.full((n,) + spec.shape(T, size, schema.S), schema.ABSENT[name],
                                spec.dtype)
    return out


IMPORT_VARIANT = schema.IMPORT_VARIANTS[0]  # the `variant` recorded for imported data


def write_psd_shards(src, out, *, split: str = "test", masks: bool = True,
                     shard_size: int = 10000) -> tuple[Path, dict]:
    """Convert `src` and write OUT/{split}/shard-*.h5 and OUT/manifest.json (written last);
    returns (OUT, info). OUT must be missing or empty."""
    from geogen.make import GENERATOR_VERSION  # imported here: make pulls in the worker pool

    if split not in schema.SPLITS:
        raise GeogenError(f"split must be one of {', '.join(schema.SPLITS)}, got {split!r}")
    if shard_size < 1:
        raise GeogenError(f"shard_size must be >= 1, got {shard_size}")
    root = Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise GeogenError(f"{root}: exists and is not an empty folder")
    arrays, info = convert_psd_folder(src, masks=masks)
    arrays = placeholders(arrays)
    fields = [f for f in schema.FIELDS if f in arrays]
    bounds = schema.bounds_of({"variant": IMPORT_VARIANT, "import": info})
    for name in fields:  # what the reader would refuse is not written
        problem = schema.value_problem(name, arrays[name], bounds)
        if problem:
            raise GeogenError(f"{src}: the converted field {name!r} {problem} (of the samples "
                              f"kept, in id order)")
    n, size = info["count"], info["size"]
    config = {"import": "psd", "source": info["source"], "masks": masks, "split": split,
              "shard_size": shard_size}
    attrs = {"variant": IMPORT_VARIANT, "seed": -1, "size": size, "frames": T,
             "generator_version": GENERATOR_VERSION, "schema_version": schema.SCHEMA_VERSION,
             "config": json.dumps(config, sort_keys=True)}
    try:
        for sp in schema.SPLITS:
            (root / sp).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise GeogenError(f"{root}: cannot write there ({err.strerror or err})") from None
    entries = []
    for k in range(math.ceil(n / shard_size)):
        first = k * shard_size
        part = {f: arrays[f][first:first + shard_size] for f in fields}
        name = f"{split}/{shards.shard_name(k)}"
        digest = _write_shard(root / name, part, size, dict(attrs, split=split,
                                                            first_index=first))
        entries.append({"file": name, "first_index": first, "count": len(part["frames"]),
                        "sha256": digest})
    counts = {sp: (n if sp == split else 0) for sp in schema.SPLITS}
    manifest = {"variant": IMPORT_VARIANT, "seed": -1, "size": size, "frames": T,
                "counts": counts, "generator_version": GENERATOR_VERSION,
                "schema_version": schema.SCHEMA_VERSION, "config": config,
                "chunk_samples": shards.chunk_samples(size, T), "fields": fields,
                "shards": {sp: (entries if sp == split else []) for sp in schema.SPLITS},
                "import": info}
    shards.write_json_atomic(root / shards.MANIFEST, manifest)
    return root, info


def _write_shard(path: Path, arrays: dict[str, np.ndarray], size: int, attrs: dict) -> str:
    """One shard through `shards.ShardWriter`; a shard smaller than the usual chunk gets
    chunks of its own length (HDF5 refuses chunks longer than a fixed-size dataset)."""
    count = len(arrays["frames"])
    chunk_n = min(shards.chunk_samples(size, T), count)
    writer = shards.ShardWriter(path, count, tuple(arrays), T, size, chunk_n,
                                dict(attrs, count=count))
    try:
        for start in range(0, count, chunk_n):
            for name, arr in arrays.items():
                arr = np.asarray(arr[start:start + chunk_n], schema.FIELDS[name].dtype)
                writer.write_chunk(start, name, shards.compress_chunk(arr, chunk_n))
    except BaseException:
        writer.abort()
        raise
    return writer.close()
