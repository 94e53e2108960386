"""Articulated+: the articulated figures textured on photographs (Geo+'s banks), with the
articulated figure's ground truth; exact flow, determinism, the manifest."""
import numpy as np
import pytest
from scipy import ndimage
from test_geogen_articulated import assert_same_shards_and_verified, make_with_one_and_two_workers
from test_geogen_plus import WARP_MEAN_TOL, WARP_P99_TOL, warp_errors

from geogen import figure, schema, shards
from geogen.dataset import read_split
from geogen.make import MakeConfig, render_one
from geogen.variants import geo_plus_banks, get_variant

SIZE = 64  # test_geogen_plus's warp_errors reads this side
N = 16
S = len(figure.PARTS)
TRUTH = ("pose", "present", "label", "amodal", "visible", "flow", "flow_bw", "joint_angle",
         "depth")


@pytest.fixture(scope="module")
def samples():
    cfg = MakeConfig(variant="articulated+", size=SIZE)
    return [render_one(cfg, "test", i) for i in range(N)]


def test_the_ground_truth_is_the_articulated_figures(samples):
    for i in range(4):
        flat = render_one(MakeConfig(variant="articulated", size=SIZE), "test", i)
        for name in TRUTH:
            assert np.array_equal(flat[name], samples[i][name]), name
        assert not np.array_equal(flat["frames"], samples[i]["frames"])
        schema.check_sample(samples[i], frames=2, size=SIZE, slots=S)


def test_flow_is_exact_within_the_resampling_tolerance(samples):
    err = np.concatenate([warp_errors(s) for s in samples])
    # The limbs are thin: most interior pixels are the torso's and legs' (measured in the
    # paper look: 2259 pixels, mean 6.4, 99th percentile 35; off by 0.5 px, a mean of 11.4-11.5).
    assert len(err) > 1800
    assert err.mean() < WARP_MEAN_TOL and np.percentile(err, 99) < WARP_P99_TOL
    for shift in ((0.5, 0.0), (0.0, 0.5), (-0.5, 0.0)):  # the tolerance catches a 0.5 px error
        bad = np.concatenate([warp_errors(s, shift) for s in samples])
        assert bad.mean() > WARP_MEAN_TOL, shift


def test_flow_is_exact_under_conformal_motion():
    cfg = MakeConfig(variant="articulated+", size=SIZE, motion="conformal")
    err = np.concatenate([warp_errors(render_one(cfg, "test", i)) for i in range(N)])
    assert len(err) > 1800
    assert err.mean() < WARP_MEAN_TOL and np.percentile(err, 99) < WARP_P99_TOL


def test_parts_are_textured_on_a_static_photograph(samples):
    bg_bank, tex_bank = geo_plus_banks(None, None, MakeConfig().max_images, SIZE)
    for s in samples:
        vis, amodal = s["visible"], s["amodal"]  # (T, H, W), (T, S, H, W)
        for t in range(2):  # visible lies inside amodal
            for k in range(S):
                assert amodal[t, k][vis[t] == k + 1].all()
        frame = s["frames"][0].astype(np.float32) / 255.0
        torso = vis[0] == 1
        assert frame[torso].mean(-1).std() > 0.01, "a flat fill has a spread of 0"
        # Pixels no part touches in either frame (edge pixels hold partial coverage).
        bg = ~ndimage.binary_dilation(amodal.any(axis=(0, 1)), iterations=2)  # (H, W)
        assert frame[bg].std(0).mean() > 0.03, "not a flat background"
        assert np.array_equal(s["frames"][0][bg], s["frames"][1][bg])
        assert 0 <= s["bg_source"] < len(bg_bank)
        assert s["tex_source"].shape == (S,) and (s["tex_source"] >= 0).all()
        assert (s["tex_source"] < len(tex_bank)).all()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_with_one_and_two_workers(tmp_path_factory.mktemp("articplus"),
                                         variant="articulated+", n=14, val=2, test=4, size=32,
                                         shard_size=6)


def test_any_worker_count_gives_the_same_shards_and_verify_passes(made):
    assert_same_shards_and_verified(*made[:2])


def test_the_manifest_names_parts_and_sources_and_samples_regenerate(made):
    one, _, kw = made
    m = shards.read_manifest(one)
    assert m["slots"] == list(figure.PARTS) and m["classes"] == list(figure.CLASSES)
    assert set(m["groups"]["left leg"]) == {"left_upper_leg", "left_lower_leg"}
    assert m["fields"] == list(get_variant("articulated+").fields)
    assert m["sources"]["backgrounds"]["source"] == "default:backgrounds"
    stored = read_split(one, "test", m["fields"])
    for i in (0, 3):
        again = render_one(MakeConfig(**kw), "test", i)
        for name in m["fields"]:
            assert np.array_equal(stored[name][i], again[name]), name
