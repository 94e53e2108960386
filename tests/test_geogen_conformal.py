"""Conformal motion: rotation and scale drawn in the documented ranges, hierarchical, and
recoverable from the stored flow; translation (Geo) untouched."""
import json

import numpy as np
from click.testing import CliRunner

from geogen import scene, schema, shards
from geogen.cli import main
from geogen.make import MakeConfig, render_one


def _scenes(seed, frames=3):
    a = scene.sample_geo_scene(np.random.default_rng(seed), 64, frames, "translation")
    b = scene.sample_geo_scene(np.random.default_rng(seed), 64, frames, "conformal")
    return a, b


def _rotate(angle, v):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def test_conformal_adds_rotation_and_scale_to_the_translation_scene():
    for seed in range(20):
        a, b = _scenes(seed)
        assert np.array_equal(a.present, b.present) and a.label == b.label
        assert np.allclose(a.pose[0], b.pose[0]), "frame 0 is the same scene"
        assert np.allclose(a.pose[:, 0, :2], b.pose[:, 0, :2], atol=1e-4), "circle path kept"
        assert np.all(a.pose[..., 2] == 0)
        turn = b.pose[1, :, 2] - b.pose[0, :, 2]                          # (S,) per frame
        grow = np.log(b.pose[1, :, 3] / b.pose[0, :, 3])                 # (S,)
        own_turn, own_grow = turn[1:] - turn[0], grow[1:] - grow[0]
        for rate, bound in ((turn[0], scene.ROTATION_RANGE), (grow[0], scene.LOG_SCALE_RANGE)):
            assert -bound <= rate < bound
        assert np.all(np.abs(own_turn) <= scene.ROTATION_RANGE + 1e-5)
        assert np.all(np.abs(own_grow) <= scene.LOG_SCALE_RANGE + 1e-5)
        # Constant rates: frame 2 continues frame 1.
        assert np.allclose(b.pose[2, :, 2], 2 * turn, atol=1e-5)
        assert np.allclose(np.log(b.pose[2, :, 3] / b.pose[0, :, 3]), 2 * grow, atol=1e-5)
        # The circle carries its children's offsets: conformal child centre - translation
        # child centre = exp(g0 t) R(w0 t) o - o, with o the offset at frame 0.
        for t in (1, 2):
            for child in (1, 2):
                o = a.pose[0, child, :2] - a.pose[0, 0, :2]
                want = np.exp(grow[0] * t) * _rotate(turn[0] * t, o) - o
                got = b.pose[t, child, :2] - a.pose[t, child, :2]
                assert np.allclose(got, want, atol=1e-3), (seed, t, child)


def _fit_similarity(p, q):
    """Least squares q = alpha p + beta over complex points: alpha = k exp(i angle)."""
    zp, zq = p[:, 0] + 1j * p[:, 1], q[:, 0] + 1j * q[:, 1]
    design = np.stack([zp, np.ones_like(zp)], 1)                         # (M, 2)
    (alpha, beta), *_ = np.linalg.lstsq(design, zq, rcond=None)
    return alpha, beta


def test_rotation_and_scale_are_recovered_from_the_stored_flow():
    cfg = MakeConfig(variant="geo", size=64, motion="conformal")
    fitted = 0
    for i in range(12):
        s = render_one(cfg, "train", i)
        pose = s["pose"].astype(np.float64)                              # (T, S, 4)
        for slot in np.flatnonzero(s["present"]):
            forward = (s["flow"][0], s["visible"][0], pose[0, slot], pose[1, slot])
            backward = (s["flow_bw"][0], s["visible"][1], pose[1, slot], pose[0, slot])
            for flow, vis, a, b in (forward, backward):
                ys, xs = np.nonzero(vis == slot + 1)
                if len(ys) < 10:
                    continue
                p = np.stack([xs + 0.5, ys + 0.5], 1)                    # (M, 2) pixel centres
                alpha, beta = _fit_similarity(p, p + flow[ys, xs])
                turn = np.angle(alpha)
                scale = np.abs(alpha)
                assert abs(turn - (b[2] - a[2])) < 1e-4, (i, slot)
                assert abs(scale - b[3] / a[3]) < 1e-4, (i, slot)
                # It turns and scales about its own centre: its centre goes to the next centre.
                centre = alpha * (a[0] + 1j * a[1]) + beta
                assert abs(centre - (b[0] + 1j * b[1])) < 1e-2, (i, slot)
                fitted += 1
    assert fitted > 30


def test_masks_scale_with_the_pose():
    cfg = MakeConfig(variant="geo", size=128, motion="conformal")
    for i in range(6):
        s = render_one(cfg, "train", i)
        for slot in np.flatnonzero(s["present"]):
            area = s["amodal"][:, slot].sum((1, 2)).astype(float)        # (T,)
            if area.min() < 100 or s["amodal"][:, slot, [0, -1]].any() \
                    or s["amodal"][:, slot, :, [0, -1]].any():
                continue   # clipped by the border
            ratio = (s["pose"][1, slot, 3] / s["pose"][0, slot, 3]) ** 2
            assert abs(area[1] / area[0] - ratio) < 0.08, (i, slot)


def test_translation_motion_is_unchanged_and_config_records_motion(tmp_path):
    a = render_one(MakeConfig(variant="geo", size=32), "test", 3)
    b = render_one(MakeConfig(variant="geo", size=32, motion="translation"), "test", 3)
    assert all(np.array_equal(a[k], b[k]) for k in schema.REQUIRED_FIELDS)
    assert np.all(a["pose"][..., 2] == 0)
    out = tmp_path / "c"
    res = CliRunner().invoke(main, ["make", "--n", "6", "--val", "0", "--test", "2", "--size",
                                    "32", "--motion", "conformal", "--out", str(out),
                                    "--workers", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    assert shards.read_manifest(out)["config"]["motion"] == "conformal"
    assert json.loads((out / "run.json").read_text())["motion"] == "conformal"
    assert shards.verify(out) == []
