"""Anti-aliased rendering of a clip from per-frame slot poses, with exact masks and flow.

Every slot s at frame t is a unit shape in canonical coordinates u (side or diameter 1, centred
on the origin; the triangle equilateral, pointing up, centroid at the origin) placed by the
similarity A_ts(u) = c_ts + size_ts * R(angle_ts) u (schema.py gives R's convention). For each
pixel the renderer computes every slot's canonical coordinates u = A_ts^-1(p) and a signed
distance; pixels farther than half a pixel diagonal from an edge are wholly in or out, and only
the band near edges is supersampled on an SS x SS grid, which gives the coverage.

What fills the pixels is an `Appearance` (below): a colour per (slot, canonical coordinates) and a
background colour per image coordinate, so flat colours (Geo) and textures that move rigidly with
their shape (Geo+) go through the same code.

Flow is analytic: the point seen at pixel centre p of frame t belongs to the visible slot s, so
it sits at A_{t+1,s}(A_ts^-1(p)) in frame t+1; flow = that - p (backward flow likewise). This
holds for any similarity per slot (translation, rotation, scaling).

Letters: T frames, S slots, H = W = image side, K = SS^2 subsamples, M band pixels, N points.
"""
from __future__ import annotations

import functools
from typing import Protocol

import numpy as np

from geogen import schema

# Half a pixel's diagonal: a pixel whose centre is farther than this from every edge is pure.
_HALF_DIAG = float(np.sqrt(0.5)) + 1e-4
# Equilateral triangle with side 1: inradius, and the outward normals of its edges (y down).
_TRI_INRADIUS = 1.0 / (2.0 * np.sqrt(3.0))
# Polygon vertices in canonical coordinates (the triangle's apex up, i.e. at negative y).
_VERTICES = {
    "square": np.array([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]], np.float32),
    "triangle": np.array([[0.0, -1 / np.sqrt(3)], [0.5, 0.5 / np.sqrt(3)],
                          [-0.5, 0.5 / np.sqrt(3)]], np.float32),
}
_TRI_NORMALS = np.array([[0.0, 1.0], [np.sqrt(3) / 2, -0.5], [-np.sqrt(3) / 2, -0.5]], np.float32)


class Appearance(Protocol):
    """What fills pixels. Colours are float32 RGB in [0, 1]; results may be broadcastable.

    fill(slot, uv): uv (..., 2) canonical coordinates of slot `slot` -> RGB (..., 3) or (3,).
    background(xy): xy (..., 2) pixel coordinates -> RGB (..., 3) or (3,); static over frames.
    """

    def fill(self, slot: int, uv: np.ndarray) -> np.ndarray: ...

    def background(self, xy: np.ndarray) -> np.ndarray: ...


class FlatAppearance:
    """Geo: one flat colour per slot and a flat background."""

    def __init__(self, colours: np.ndarray, background: np.ndarray):
        self.colours = np.asarray(colours, np.float32) / 255.0        # (S, 3)
        self.bg = np.asarray(background, np.float32) / 255.0           # (3,)

    def fill(self, slot: int, uv: np.ndarray) -> np.ndarray:
        return self.colours[slot]                                      # (3,)

    def background(self, xy: np.ndarray) -> np.ndarray:
        return self.bg                                                 # (3,)


def signed_distance(kind, u: np.ndarray) -> np.ndarray:
    """Signed distance (negative inside) of canonical points u (..., 2) to a unit shape.

    Exact inside; outside it never exceeds the true distance (square and triangle use the max of
    edge distances), which is all the band test needs: a point called far outside is.
    `kind` is a Geo shape's name or an object with `signed_distance(u)` that keeps the same
    promise on both sides of its edge, `inside(u)` (signed distance < 0) and `half_extents`
    (hx, hy) of a box around it in canonical coordinates (geogen.figure's parts).
    """
    if not isinstance(kind, str):
        return kind.signed_distance(u)
    ux, uy = u[..., 0], u[..., 1]
    if kind == "circle":
        return np.sqrt(ux * ux + uy * uy) - 0.5
    if kind == "square":
        return np.maximum(np.abs(ux), np.abs(uy)) - 0.5
    if kind == "triangle":
        n = _TRI_NORMALS
        d = np.maximum(np.maximum(n[0, 0] * ux + n[0, 1] * uy, n[1, 0] * ux + n[1, 1] * uy),
                       n[2, 0] * ux + n[2, 1] * uy)
        return d - _TRI_INRADIUS
    raise ValueError(f"unknown shape kind {kind!r}")


def _to_canonical(pose: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """u = R(-angle) (xy - centre) / size for one pose (4,) and points xy (N, 2) -> (N, 2)."""
    cx, cy, a, k = (float(v) for v in pose)
    c, s, inv = np.float32(np.cos(a) / k), np.float32(np.sin(a) / k), np.float32(1.0 / k)
    d = xy - np.array([cx, cy], np.float32)                                       # (N, 2)
    if s == 0.0:   # no rotation (all of Geo): a scaled shift
        return d * inv
    out = np.empty_like(d)                                                        # (N, 2)
    np.add(c * d[:, 0], s * d[:, 1], out=out[:, 0])
    np.subtract(c * d[:, 1], s * d[:, 0], out=out[:, 1])
    return out


def _from_canonical(pose: np.ndarray, u: np.ndarray) -> np.ndarray:
    """xy = centre + size * R(angle) u for one pose (4,) and u (N, 2) -> (N, 2)."""
    cx, cy, a, k = (float(v) for v in pose)
    c, s = np.float32(np.cos(a) * k), np.float32(np.sin(a) * k)
    out = np.empty(u.shape, np.float32)                                           # (N, 2)
    out[:, 0] = cx + c * u[:, 0] - s * u[:, 1]
    out[:, 1] = cy + s * u[:, 0] + c * u[:, 1]
    return out


@functools.lru_cache(maxsize=8)
def pixel_centres(size: int) -> np.ndarray:
    """(x + 0.5, y + 0.5) at every pixel (y, x): (H, W, 2) float32, read-only (it is shared)."""
    axis = np.arange(size, dtype=np.float32) + 0.5
    gx, gy = np.meshgrid(axis, axis)
    xy = np.stack([gx, gy], -1)                                                   # (H, W, 2)
    xy.setflags(write=False)
    return xy


@functools.lru_cache(maxsize=8)
def _subsample_offsets(ss: int) -> np.ndarray:
    """Offsets (K, 2) of an ss x ss grid of subsample centres around a pixel centre."""
    g = (np.arange(ss, dtype=np.float32) + 0.5) / ss - 0.5
    gx, gy = np.meshgrid(g, g)
    return np.stack([gx.ravel(), gy.ravel()], -1)                                 # (K, 2)


def _to_uint8(rgb: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(rgb * np.float32(255.0)), 0, 255).astype(np.uint8)


def _box(pose_ts: np.ndarray, kind, size: int) -> tuple[int, int, int, int]:
    """Pixel rows/cols (y0, y1, x0, x1) that can touch the slot: its bounding box plus a pixel."""
    if not isinstance(kind, str):
        # A box (hx, hy) turned by a and scaled by k reaches k (|cos a| hx + |sin a| hy) in x
        # and k (|sin a| hx + |cos a| hy) in y from its centre.
        hx, hy = kind.half_extents
        cx, cy, a, k = (float(v) for v in pose_ts)
        c, s = abs(np.cos(a)), abs(np.sin(a))
        ex, ey = k * (c * hx + s * hy), k * (s * hx + c * hy)
        lo, hi = (cx - ex, cy - ey), (cx + ex, cy + ey)
    elif kind == "circle":
        r = 0.5 * float(pose_ts[3])
        lo, hi = pose_ts[:2] - r, pose_ts[:2] + r                                  # (2,)
    else:
        corners = _from_canonical(pose_ts, _VERTICES[kind])                         # (V, 2)
        lo, hi = corners.min(0), corners.max(0)
    x0, y0 = (max(int(np.floor(v)) - 1, 0) for v in lo)
    x1, y1 = (min(int(np.ceil(v)) + 1, size) for v in hi)
    return y0, max(y1, y0), x0, max(x1, x0)


def _subsamples_inside(kind, pose_ts: np.ndarray, p: np.ndarray, u: np.ndarray,
                       offsets: np.ndarray) -> np.ndarray:
    """Which of the K subsamples around each of M band pixels are inside the shape: (M, K).

    p (M, 2) the pixels' centres, u (M, 2) their canonical coordinates. A Geo shape maps every
    subsample to canonical coordinates itself (the bytes of Geo's data stay as they were); a
    shape object moves u by the canonical offsets instead (the map is affine, so u(p + o) =
    u(p) + A^-1 o) and asks its cheaper `inside`, which its many small parts need.
    """
    if isinstance(kind, str):
        sub = p[:, None, :] + offsets[None]                                        # (M, K, 2)
        u_sub = _to_canonical(pose_ts, sub.reshape(-1, 2))                         # (M*K, 2)
        return signed_distance(kind, u_sub).reshape(sub.shape[:2]) < 0
    step = _to_canonical(np.array([0, 0, pose_ts[2], pose_ts[3]], np.float32), offsets)  # (K, 2)
    return kind.inside(u[:, None, :] + step[None])                                 # (M, K)


def render_clip(pose: np.ndarray, present: np.ndarray, appearance: Appearance, size: int,
                supersample: int = 5, kinds: tuple = schema.SLOTS,
                order: tuple[int, ...] | None = None) -> dict[str, np.ndarray]:
    """Render T frames of S slots at side `size`.

    Work is confined to each slot's bounding box, so its cost grows with the shapes' area.

    Args:
        pose: (T, S, 4) float32 per-frame slot poses (schema `pose`).
        present: (S,) bool, which slots are drawn.
        appearance: fill and background colours.
        size: image side H = W in pixels.
        supersample: SS, the per-axis subsample count in the edge band.
        kinds: (S,) each slot's shape (`signed_distance`); Geo's slot names by default.
        order: the slots back to front (each drawn over those before it); None: slot order.
    Returns:
        frames, flow, flow_bw, amodal, visible as in geogen.schema.
    """
    T, S = pose.shape[:2]
    H = W = size
    pose = np.asarray(pose, np.float32)
    xy = pixel_centres(size)                                                      # (H, W, 2)
    offsets = _subsample_offsets(supersample)                                     # (K, 2)

    bg = np.asarray(appearance.background(xy), np.float32)                        # (3,) or (H, W, 3)
    rgb = np.empty((T, H, W, 3), np.float32)                                      # (T, H, W, 3)
    rgb[:] = bg
    touched = [[size, 0, size, 0] for _ in range(T)]   # per frame: rows/cols any slot drew on
    amodal = np.zeros((T, S, H, W), bool)
    visible = np.zeros((T, H, W), np.uint8)   # schema.BACKGROUND where no slot holds the pixel
    boxes: dict[tuple[int, int], tuple] = {}   # (t, s) -> (box slices, canonical coords there)
    for t in range(T):
        for s in (range(S) if order is None else order):   # back to front: each over the last
            kind = kinds[s]
            if not present[s]:
                continue
            y0, y1, x0, x1 = _box(pose[t, s], kind, size)
            if y1 == y0 or x1 == x0:
                continue
            win = (slice(y0, y1), slice(x0, x1))
            p = xy[win]                                                           # (h, w, 2)
            u = _to_canonical(pose[t, s], p.reshape(-1, 2)).reshape(p.shape)      # (h, w, 2)
            sd = signed_distance(kind, u) * pose[t, s, 3]                         # (h, w) pixels
            cover = (sd < 0).astype(np.float32)                                   # (h, w)
            band = np.abs(sd) < _HALF_DIAG
            if band.any():
                inside = _subsamples_inside(kind, pose[t, s], p[band], u[band], offsets)
                cover[band] = inside.sum(-1) * np.float32(1.0 / len(offsets))
            inside_half = cover >= 0.5                                            # (h, w)
            amodal[t, s][win] = inside_half
            visible[t][win][inside_half] = s + 1   # later (nearer) slots overwrite earlier ones
            view = rgb[t][win]                                                    # (h, w, 3)
            view += cover[..., None] * (appearance.fill(s, u) - view)
            boxes[t, s] = (win, u)
            tb = touched[t]
            tb[:] = [min(tb[0], y0), max(tb[1], y1), min(tb[2], x0), max(tb[3], x1)]
    # Quantise: the background once, then only the part of each frame that shapes drew on.
    frames = np.empty((T, H, W, 3), np.uint8)                                     # (T, H, W, 3)
    frames[:] = _to_uint8(bg)
    for t, (y0, y1, x0, x1) in enumerate(touched):
        if y1 > y0 and x1 > x0:
            frames[t, y0:y1, x0:x1] = _to_uint8(rgb[t, y0:y1, x0:x1])

    flow = np.zeros((T - 1, H, W, 2), np.float32)                                 # (T-1, H, W, 2)
    flow_bw = np.zeros((T - 1, H, W, 2), np.float32)
    for (t, s), (win, u) in boxes.items():
        # Where slot s is visible at t, its points move by A_{t+1,s} A_ts^-1; at t+1, backwards.
        if t + 1 < T:
            _put_flow(flow[t], visible[t], s, win, xy[win], u, pose[t, s], pose[t + 1, s])
        if t > 0:
            _put_flow(flow_bw[t - 1], visible[t], s, win, xy[win], u, pose[t, s], pose[t - 1, s])

    return {"frames": frames, "flow": flow, "flow_bw": flow_bw, "amodal": amodal,
            "visible": visible}


def _put_flow(out: np.ndarray, visible: np.ndarray, s: int, win: tuple, p: np.ndarray,
              u: np.ndarray, pose_from: np.ndarray, pose_to: np.ndarray) -> None:
    """Write A_to(u) - p into out (H, W, 2) where `visible` names slot s inside window `win`."""
    mask = visible[win] == s + 1                                                  # (h, w)
    if not mask.any():
        return
    if pose_from[2] == pose_to[2] and pose_from[3] == pose_to[3]:
        # A pure translation: A_to A_from^-1 p - p is the centre's shift at every pixel, and
        # writing it as one constant keeps the stored flow exactly piecewise constant.
        np.copyto(out[win], pose_to[:2] - pose_from[:2], where=mask[..., None])
        return
    target = _from_canonical(pose_to, u.reshape(-1, 2)).reshape(u.shape)          # (h, w, 2)
    np.copyto(out[win], target - p, where=mask[..., None])
