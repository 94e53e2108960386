"""Rendering: exact flow, masks that agree with each other, anti-aliased edges, any similarity."""
import numpy as np
import pytest
from scipy.ndimage import map_coordinates, minimum_filter, maximum_filter

from geogen import schema
from geogen.render import FlatAppearance, render_clip, signed_distance
from geogen.make import MakeConfig
from geogen.variants import make_sample

SIZE = 32


def _warp_back(frame_next: np.ndarray, flow: np.ndarray) -> np.ndarray:
    """Sample frame t+1 (H, W, 3) at (x + dx, y + dy) bilinearly -> (H, W, 3)."""
    H, W = flow.shape[:2]
    ys, xs = np.mgrid[0:H, 0:W].astype(np.float64)
    # pixel (x, y) has centre (x + .5, y + .5); array index = coordinate - .5
    rows, cols = ys + flow[..., 1], xs + flow[..., 0]
    return np.stack([map_coordinates(frame_next[..., c].astype(np.float64), [rows, cols],
                                     order=1, mode="nearest") for c in range(3)], -1)


def _interior(labels: np.ndarray) -> np.ndarray:
    """Pixels whose 3x3 neighbourhood has one label (away from every edge)."""
    return (minimum_filter(labels, 3) == maximum_filter(labels, 3))


def _rot(a: float) -> np.ndarray:
    return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])


def _expected_flow(pose: np.ndarray, vis: np.ndarray, t: int) -> np.ndarray:
    """Flow worked out here from the poses alone: A_{t+1} A_t^-1 p - p for the visible slot."""
    H, W = vis.shape[1:]
    out = np.zeros((H, W, 2))
    for y in range(H):
        for x in range(W):
            k = int(vis[t, y, x]) - 1
            if k >= 0:
                p = np.array([x + 0.5, y + 0.5])
                (c0, s0), (c1, s1) = (pose[t, k, :2], pose[t, k, 3]), (pose[t + 1, k, :2],
                                                                        pose[t + 1, k, 3])
                u = _rot(-pose[t, k, 2]) @ (p - c0) / s0
                out[y, x] = c1 + s1 * _rot(pose[t + 1, k, 2]) @ u - p
    return out


def _check_flow(sample: dict, t: int = 0) -> int:
    """Assert sampling frame t+1 at p + flow gives frame t at every pixel away from edges whose
    point is not occluded at t+1 (judged from the poses, not from the stored flow); count them."""
    frames, flow, vis = sample["frames"], sample["flow"][t], sample["visible"]
    truth = _expected_flow(sample["pose"], vis, t)
    warped = _warp_back(frames[t + 1], flow)
    H, W = vis.shape[1:]
    ys, xs = np.mgrid[0:H, 0:W]
    tx = np.floor(xs + truth[..., 0]).astype(int)   # the 2x2 neighbours a lookup would read
    ty = np.floor(ys + truth[..., 1]).astype(int)
    inside = (tx >= 0) & (ty >= 0) & (tx + 1 < W) & (ty + 1 < H)
    ok = _interior(vis[t]) & inside
    nxt = _interior(vis[t + 1])
    for dy in (0, 1):
        for dx in (0, 1):
            cy, cx = np.clip(ty + dy, 0, H - 1), np.clip(tx + dx, 0, W - 1)
            ok &= (vis[t + 1][cy, cx] == vis[t]) & nxt[cy, cx]
    err = np.abs(warped - frames[t].astype(np.float64)).max(-1)
    assert ok.sum() > 100
    assert err[ok].max() <= 1.0, f"flow misses by {err[ok].max()} grey levels"
    return int(ok.sum())


@pytest.mark.parametrize("index", range(6))
def test_flow_is_exact_for_geo_samples(index):
    s = make_sample(MakeConfig(n=1, seed=3, size=SIZE, frames=3), "train", index)
    for t in range(2):
        _check_flow(s, t)
        # Translation only: each visible slot's flow is its pose difference, 0 on the background.
        for k in range(schema.S):
            m = s["visible"][t] == k + 1
            want = s["pose"][t + 1, k, :2] - s["pose"][t, k, :2]
            assert np.allclose(s["flow"][t][m], want, atol=1e-4)
            m_bw = s["visible"][t + 1] == k + 1
            assert np.allclose(s["flow_bw"][t][m_bw], -want, atol=1e-4)
        assert not s["flow"][t][s["visible"][t] == schema.BACKGROUND].any()


def test_flow_is_exact_under_rotation_and_scaling():
    # A conformal clip: every slot turns and grows; the renderer must not assume translation.
    pose = np.array([[[16, 16, 0.0, 14], [12, 18, 0.3, 9], [21, 12, -0.2, 10]],
                     [[17, 15, 0.25, 15.5], [13, 17, 0.6, 10], [20, 13, 0.1, 11]]], np.float32)
    app = FlatAppearance(np.array([[200, 30, 40], [20, 210, 30], [10, 20, 220]]),
                         np.array([240, 235, 190]))
    s = render_clip(pose, np.ones(3, bool), app, SIZE, 8)
    s["pose"] = pose
    _check_flow(s)
    # The flow is A_1 A_0^-1 p - p: check it at one circle pixel by hand.
    ys, xs = np.nonzero(s["visible"][0] == 1)
    y, x = ys[0], xs[0]
    p = np.array([x + 0.5, y + 0.5])
    u = _rot(-0.0) @ (p - pose[0, 0, :2]) / pose[0, 0, 3]
    q = pose[1, 0, :2] + pose[1, 0, 3] * _rot(0.25) @ u
    assert np.allclose(s["flow"][0][y, x], q - p, atol=1e-3)


@pytest.mark.parametrize("index", range(4))
def test_visible_lies_inside_amodal_and_names_the_front_slot(index):
    s = make_sample(MakeConfig(n=1, size=SIZE), "val", index)
    vis, amodal = s["visible"], s["amodal"]                  # (T, H, W), (T, S, H, W)
    for t in range(2):
        front = np.zeros(vis[t].shape, np.uint8)
        for k in range(schema.S):
            front[amodal[t, k]] = k + 1                      # later slots are in front
        assert np.array_equal(vis[t], front)
    assert not amodal[:, ~s["present"]].any(), "an absent slot has an empty mask"


def test_edges_are_antialiased_and_coverage_is_exact():
    # One circle of diameter 20 on a flat background: its mask area is close to pi r^2, and
    # edge pixels take colours between the fill and the background.
    pose = np.zeros((2, 3, 4), np.float32)
    pose[:, 0] = [16.3, 15.8, 0, 20]
    present = np.array([True, False, False])
    app = FlatAppearance(np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0]]), np.array([255, 255, 255]))
    s = render_clip(pose, present, app, SIZE, 8)
    darkness = (255 - s["frames"][0, ..., 0].astype(np.float64)) / 255
    assert darkness.sum() == pytest.approx(np.pi * 10 ** 2, rel=0.01)
    assert s["amodal"][0, 0].sum() == pytest.approx(np.pi * 10 ** 2, abs=2 * np.pi * 10 * 0.3)
    partial = (darkness > 0.05) & (darkness < 0.95)
    assert partial.sum() > 30


def test_signed_distance_of_unit_shapes():
    pts = np.array([[0.0, 0.0], [0.5, 0.0], [0.0, -1 / np.sqrt(3)], [0.6, 0.6]], np.float32)
    assert np.allclose(signed_distance("circle", pts)[:2], [-0.5, 0.0], atol=1e-6)
    assert np.allclose(signed_distance("square", pts)[[0, 1, 3]], [-0.5, 0.0, 0.1], atol=1e-6)
    tri = signed_distance("triangle", pts)
    assert tri[0] == pytest.approx(-1 / (2 * np.sqrt(3)), abs=1e-6)   # centroid: minus inradius
    assert tri[2] == pytest.approx(0.0, abs=1e-6)                      # apex points up (y down)
    with pytest.raises(ValueError):
        signed_distance("hexagon", pts)
