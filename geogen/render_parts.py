"""`render_clip` for slots that are shape objects (geogen.figure's parts), all at once.

`render_clip` draws one slot of one frame at a time, a few dozen numpy calls each; with ten
small parts in every frame most of a figure's time went into those calls rather than into
arithmetic. Here the pixels of every drawn (frame, slot) box are laid end to end in one flat
array, and each step of `render_clip` (canonical coordinates, signed distance, the band's
subsamples, masks, flow) is one call over all of them, or one per class of shape. Each
pixel goes through the same float32 operations as in `render_clip`, so the output is
`render_clip`'s bit for bit (tests/test_geogen_render_parts.py holds them to it).

Drawing back to front stays sequential only where it must: each drawn slot in turn blends
its covered pixels, in every frame at once, into the frames (`_blend`).

Letters: T frames, S slots, H = W = image side, J drawn (frame, slot) pairs in drawing order
(frame by frame, back to front), E the pixels of their boxes end to end, M band pixels among
them, K = SS^2 subsamples.
"""
from __future__ import annotations

import numpy as np

from geogen.render import _HALF_DIAG, Appearance, _subsample_offsets, _to_uint8, pixel_centres


def _boxes(pose: np.ndarray, half: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    """`render._box` for J poses (J, 4) float32 and their boxes' half extents (J, 2): rows
    y0, y1 and columns x0, x1, (J,) int each (float64 arithmetic, as that function's)."""
    cx, cy, a, k = pose.astype(np.float64).T                                      # (J,) each
    c, s = np.abs(np.cos(a)), np.abs(np.sin(a))
    ex, ey = k * (c * half[:, 0] + s * half[:, 1]), k * (s * half[:, 0] + c * half[:, 1])
    lo = np.maximum(np.floor([cx - ex, cy - ey]) - 1, 0).astype(np.int64)         # (2, J)
    hi = np.maximum(np.minimum(np.ceil([cx + ex, cy + ey]) + 1, size).astype(np.int64), lo)
    return lo[1], hi[1], lo[0], hi[0]


def _rotation(pose: np.ndarray, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """(cos a, sin a) divided (`inverse`) or multiplied by the size, per pose (N, 4): (N,)
    float32 each, rounded once from float64 as `render._to_canonical` rounds them."""
    a, k = pose[:, 2].astype(np.float64), pose[:, 3].astype(np.float64)
    c, s = np.cos(a), np.sin(a)
    if inverse:
        return (c / k).astype(np.float32), (s / k).astype(np.float32)
    return (c * k).astype(np.float32), (s * k).astype(np.float32)


def _canonical(dx: np.ndarray, dy: np.ndarray, c: np.ndarray, s: np.ndarray,
               inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R(-a) d / k as `render._to_canonical` computes it, a scaled shift where sin is 0:
    offsets dx, dy and each one's c, s, 1/k (all broadcast together)."""
    ux, uy = c * dx + s * dy, c * dy - s * dx
    if (s == 0).any():
        ux, uy = np.where(s == 0, dx * inv, ux), np.where(s == 0, dy * inv, uy)
    return ux, uy


def _blend(rgb: np.ndarray, appearance: Appearance, cover: np.ndarray, pix: np.ndarray,
           slot: np.ndarray, ux: np.ndarray, uy: np.ndarray, rank: np.ndarray,
           drawn: list) -> None:
    """Blend the elements' fills into rgb (T H W, 3) in place, back to front: at each pixel
    x <- x + cover (fill - x), the pairs in drawing order (`rank` (E,), `drawn` the slots).

    A pixel a pair does not cover keeps its colour exactly (x + 0 (f - x) is x), so only
    covered elements blend; a slot's fill is asked once, for its elements in every frame."""
    lit = np.flatnonzero(cover > 0)
    place = rank[lit]
    lit = lit[np.argsort(place, kind="stable")]                                   # (L,) drawn order
    count = np.bincount(place, minlength=len(drawn))                              # (D,)
    ends = np.cumsum(count)
    for s, a, b in zip(drawn, ends - count, ends):
        e = lit[a:b]
        q = pix[e]
        view = rgb[q]                                                             # (n, 3)
        fill = appearance.fill(s, np.stack([ux[e], uy[e]], -1))                   # (n, 3) or (3,)
        rgb[q] = view + cover[e, None] * (fill - view)


def _class_terms(kinds: tuple, classes: list) -> dict[type, np.ndarray]:
    """Per class of shape, every slot's terms (n, S) float32 (zeros for the other classes')."""
    out = {}
    for cls in classes:
        n = len(next(k for k in kinds if type(k) is cls).terms())
        out[cls] = np.array([k.terms() if type(k) is cls else np.zeros(n)
                             for k in kinds]).T.astype(np.float32)
    return out


def render_parts(pose: np.ndarray, present: np.ndarray, appearance: Appearance, size: int,
                 supersample: int = 5, kinds: tuple = (),
                 order: tuple[int, ...] | None = None) -> dict[str, np.ndarray]:
    """`geogen.render.render_clip` (the same arguments and result) for `kinds` that are all
    shape objects (`terms`, `distance`, `covers`, `half_extents`)."""
    T, S = pose.shape[:2]
    H = W = size
    pose = np.asarray(pose, np.float32)
    offsets = _subsample_offsets(supersample)                                     # (K, 2)
    drawn = [s for s in (range(S) if order is None else order) if present[s]]
    D = len(drawn)
    # The pairs, grouped by class of shape (so that each class's points are one run), in
    # drawing order within a class; `key` is a pair's place in drawing order.
    classes = list(dict.fromkeys(type(k) for k in kinds))
    key = sorted(range(T * D), key=lambda j: classes.index(type(kinds[drawn[j % D]])))
    key = np.array(key, np.int64)                                                 # (J,)
    jt, js = key // D, np.array(drawn, np.int64)[key % D]                         # (J,) each
    pj = pose[jt, js]                                                             # (J, 4)
    y0, y1, x0, x1 = _boxes(pj, np.array([k.half_extents for k in kinds])[js], size)
    w = x1 - x0
    n = (y1 - y0) * w                                                             # (J,)

    # Every box's pixels end to end, row by row: element e -> its pair, row and column.
    first = np.cumsum(n) - n                                                      # (J,)
    je = np.repeat(np.arange(len(n)), n)                                          # (E,)
    row, col = np.divmod(np.arange(len(je)) - first[je], w[je])
    row += y0[je]
    col += x0[je]
    pix = (jt[je] * H + row) * W + col                                            # (E,) in T H W
    c, s = _rotation(pj, inverse=True)                                            # (J,) each
    inv = (1.0 / pj[:, 3].astype(np.float64)).astype(np.float32)                  # (J,)
    # Pixel centres as `render.pixel_centres` has them, minus the pair's centre.
    dx = (col.astype(np.float32) + 0.5) - pj[je, 0]                               # (E,)
    dy = (row.astype(np.float32) + 0.5) - pj[je, 1]
    ux, uy = _canonical(dx, dy, c[je], s[je], inv[je])                            # (E,) each
    slot = js[je]                                                                  # (E,)
    terms = _class_terms(kinds, classes)
    runs = np.searchsorted(je, np.searchsorted(  # each class's first element, and the end
        [classes.index(type(kinds[q])) for q in js], np.arange(len(classes) + 1)))
    sd = np.empty(len(je), np.float32)                                            # (E,)
    for cls, a, b in zip(classes, runs, runs[1:]):
        sd[a:b] = cls.distance(ux[a:b], uy[a:b], terms[cls][:, slot[a:b]])
    sd *= pj[je, 3]                                                                # pixels
    cover = (sd < 0).astype(np.float32)                                           # (E,)

    # The band near edges: SS x SS subsamples, moved in canonical coordinates by each
    # pair's offsets (the map is affine), as render_clip's `_subsamples_inside` does.
    band = np.flatnonzero(np.abs(sd) < _HALF_DIAG)                                # (M,)
    ox, oy = _canonical(offsets[:, :1], offsets[:, 1:], c, s, inv)                # (K, J) each
    jb = je[band]                                                                 # (M,)
    per_pair = np.bincount(jb, minlength=len(n))                                 # (J,)
    sx = ux[band] + np.repeat(ox, per_pair, axis=1)                               # (K, M)
    sy = uy[band] + np.repeat(oy, per_pair, axis=1)
    count = np.empty(len(band), np.int64)                                         # (M,)
    for cls, a, b in zip(classes, *np.searchsorted(band, [runs[:-1], runs[1:]])):
        inside = cls.covers(sx[:, a:b], sy[:, a:b], terms[cls][:, slot[band[a:b]]])  # (K, m)
        count[a:b] = inside.view(np.uint8).sum(0, dtype=np.uint16)   # K <= 256; a faster sum
    cover[band] = count * np.float32(1.0 / len(offsets))
    held = np.flatnonzero(cover >= 0.5)                                           # in the masks

    amodal = np.zeros((T, S, H, W), bool)
    at = (jt[je[held]] * S + slot[held]) * (H * W) + row[held] * W + col[held]     # in T S H W
    amodal.reshape(-1)[at] = True
    # A pixel shows the pair drawn last on it: the largest drawing place among those that
    # hold it (encoded with the element, so that the winner's element comes back too).
    best = np.full(T * H * W, -1, np.int64)
    np.maximum.at(best, pix[held], key[je[held]] * len(je) + held)
    shown = np.flatnonzero(best >= 0)                                             # (V,) pixels
    front = best[shown] % len(je)                                                 # (V,) elements
    visible = np.zeros((T, H, W), np.uint8)   # schema.BACKGROUND where no slot holds the pixel
    visible.reshape(-1)[shown] = slot[front] + 1

    xy = pixel_centres(size)                                                      # (H, W, 2)
    rgb = np.empty((T, H, W, 3), np.float32)                                      # (T, H, W, 3)
    bg = np.asarray(appearance.background(xy), np.float32)         # (3,) or (H, W, 3)
    if bg.ndim == 1:   # a flat colour: one row of it, which broadcasts in long runs
        bg = np.tile(bg, (W, 1))                                                  # (W, 3)
    rgb[:] = bg
    _blend(rgb.reshape(-1, 3), appearance, cover, pix, slot, ux, uy, key[je] % D, drawn)
    # Quantise the background once, then only the rows/cols the pairs drew on (outside them
    # rgb is the background's, bit for bit).
    frames = np.empty((T, H, W, 3), np.uint8)                                     # (T, H, W, 3)
    frames[:] = _to_uint8(bg)
    if len(je):
        a, b, c_, d = y0.min(), y1.max(), x0.min(), x1.max()
        frames[:, a:b, c_:d] = _to_uint8(rgb[:, a:b, c_:d])

    # Where slot s shows at t, its points move to A_{t+dt,s} A_ts^-1 (dt = 1: `flow`, at t;
    # dt = -1: `flow_bw`, at t - 1).
    shown_t = jt[je[front]]                                                       # (V,)
    ahead, back = shown_t < T - 1, shown_t > 0
    e = np.concatenate([front[ahead], front[back]])                               # (F,)
    t = jt[je[e]]
    dt = np.where(np.arange(len(e)) < ahead.sum(), 1, -1)                         # (F,)
    to = (t + dt) * S + slot[e]                                                   # (F,) into (T, S)
    ct, st = _rotation(pose.reshape(-1, 4), inverse=False)                        # (T S,) each
    dest = pose.reshape(-1, 4)[to]                                                # (F, 4)
    fro = pj[je[e]]                                                               # (F, 4)
    px, py = col[e].astype(np.float32) + 0.5, row[e].astype(np.float32) + 0.5     # (F,) each
    moved = np.stack([dest[:, 0] + ct[to] * ux[e] - st[to] * uy[e] - px,
                      dest[:, 1] + st[to] * ux[e] + ct[to] * uy[e] - py], -1)     # (F, 2)
    # A pure translation: the centre's shift at every pixel (exactly piecewise constant).
    still = (fro[:, 2] == dest[:, 2]) & (fro[:, 3] == dest[:, 3])
    moved[still] = dest[still, :2] - fro[still, :2]
    both = np.zeros((2, T - 1, H, W, 2), np.float32)                              # flow, flow_bw
    where = ((np.where(dt > 0, 0, 1) * (T - 1) + np.minimum(t, t + dt)) * H + row[e]) * W + col[e]
    both.reshape(-1, 2)[where] = moved
    return {"frames": frames, "flow": both[0], "flow_bw": both[1], "amodal": amodal,
            "visible": visible}
