"""The articulated figures: exact flow, masks, joints that hold, determinism, the manifest."""
import numpy as np
import pytest
from test_geogen_render import _check_flow

from geogen import figure, schema, shards
from geogen.dataset import open_split, read_split
from geogen.make import MakeConfig, make_dataset
from geogen.render import _HALF_DIAG
from geogen.variants import make_sample, sample_rng

SIZE = 64
S = len(figure.PARTS)


def _config(**kw):
    return MakeConfig(**{"variant": "articulated", "n": 1, "size": SIZE, **kw})


@pytest.mark.parametrize("index", range(4))
@pytest.mark.parametrize("motion", ["translation", "conformal"])
def test_flow_is_exact(index, motion):
    s = make_sample(_config(seed=2, frames=3, motion=motion), "train", index)
    for t in range(2):
        _check_flow(s, t)
        assert not s["flow"][t][s["visible"][t] == schema.BACKGROUND].any()
        assert not s["flow_bw"][t][s["visible"][t + 1] == schema.BACKGROUND].any()


@pytest.mark.parametrize("index", range(6))
def test_visible_is_the_front_most_part_in_depth_order(index):
    s = make_sample(_config(frames=2), "val", index)
    vis, amodal, depth = s["visible"], s["amodal"], s["depth"]   # (T, H, W), (T, S, H, W), (S,)
    assert sorted(depth.tolist()) == list(range(S))
    for t in range(2):
        front = np.zeros(vis[t].shape, np.uint8)
        for k in np.argsort(depth):                           # back to front
            front[amodal[t, k]] = k + 1
        assert np.array_equal(vis[t], front)
        assert (amodal[t].sum((1, 2)) > 0).all(), "every part is drawn"
        hidden = amodal[t] & (vis[t][None] != np.arange(1, S + 1)[:, None, None])
        assert hidden.any(), "some part hides behind another"   # self-occlusion happens


def test_self_occlusion_reaches_every_part_over_a_few_samples():
    hidden = np.zeros(S)
    for i in range(40):
        s = make_sample(_config(), "train", i)
        a, v = s["amodal"][0], s["visible"][0]
        hidden += (a & (v[None] != np.arange(1, S + 1)[:, None, None])).any((1, 2))
    assert (hidden > 0).all(), dict(zip(figure.PARTS, hidden))


@pytest.mark.parametrize("motion", ["translation", "conformal"])
def test_each_child_touches_its_parent_at_its_joint(motion):
    for i in range(8):
        s = make_sample(_config(frames=3, motion=motion), "test", i)
        shapes = figure.sample_figure_scene(sample_rng(0, "test", i), SIZE, 3, motion).kinds
        pose, amodal = s["pose"].astype(np.float64), s["amodal"]
        joints = figure.joint_points(pose)                      # (T, S, 2)
        for k in range(1, S):
            for t in range(3):
                # The joint, placed from the child's pose, lies inside both shapes by more than
                # half a pixel's diagonal, so the pixel holding it is in both amodal masks.
                x, y = joints[t, k]
                for part in (k, figure.PARENT[k]):
                    d = joints[t, k] - pose[t, part, :2]
                    c, sn = np.cos(pose[t, part, 2]), np.sin(pose[t, part, 2])
                    u = np.array([[c * d[0] + sn * d[1], c * d[1] - sn * d[0]]]) / pose[t, part, 3]
                    sd = shapes[part].signed_distance(u)[0] * pose[t, part, 3]
                    assert sd < -_HALF_DIAG, (figure.PARTS[k], figure.PARTS[part], t, sd)
                    assert amodal[t, part, int(y), int(x)], (figure.PARTS[k], t)


def test_joint_angles_stay_within_limits_and_the_figure_in_the_image():
    lo = np.array([figure.spec(p)[0].limits[0] for p in figure.PARTS])
    hi = np.array([figure.spec(p)[0].limits[1] for p in figure.PARTS])
    signs = np.array([figure.spec(p)[1] for p in figure.PARTS])
    for i in range(10):
        s = make_sample(_config(frames=6), "train", i)
        mirrored = s["joint_angle"][:, 1:] * signs[1:]          # right-side convention
        assert (mirrored >= lo[1:] - 1e-5).all() and (mirrored <= hi[1:] + 1e-5).all()
        assert s["joint_angle"][:, 1:].std(0).max() > 0, "the joints move"
        # A part's angle on the image is its parent's plus its joint angle.
        for k in range(1, S):
            want = s["pose"][:, figure.PARENT[k], 2] + s["joint_angle"][:, k]
            assert np.allclose(s["pose"][:, k, 2], want, atol=1e-5)
        assert not s["amodal"][:, :, [0, -1], :].any() and not s["amodal"][:, :, :, [0, -1]].any()


def test_shapes_signed_distance_never_overstates():
    # The band test needs |sd| <= the true distance; check on points at known distances.
    e = figure.Ellipse(0.4)
    theta = np.linspace(0, 2 * np.pi, 200)
    edge = np.stack([0.2 * np.cos(theta), 0.5 * np.sin(theta)], -1)   # on the ellipse
    assert np.abs(e.signed_distance(edge)).max() < 1e-6
    rng = np.random.default_rng(0)
    pts = rng.uniform(-1, 1, size=(2000, 2))
    true = np.min(np.linalg.norm(pts[:, None] - edge[None], axis=-1), 1)
    assert (np.abs(e.signed_distance(pts)) <= true + 1e-3).all()
    box = figure.RoundedBox(0.5, 0.1)
    assert np.isclose(box.signed_distance(np.array([[0.0, 0.0]]))[0], -0.25)
    assert np.isclose(box.signed_distance(np.array([[0.0, 0.7]]))[0], 0.2)
    assert np.isclose(box.signed_distance(np.array([[0.25 + 0.3, 0.0]]))[0], 0.3)


def make_with_one_and_two_workers(root, **kw):
    """The same set made by one worker and by two (the articulated+ tests share this)."""
    one = make_dataset(MakeConfig(**kw, out=str(root / "one"), workers=1), progress=False)
    two = make_dataset(MakeConfig(**kw, out=str(root / "two"), workers=2), progress=False)
    return one, two, kw


def assert_same_shards_and_verified(one, two):
    assert shards.read_manifest(one)["shards"] == shards.read_manifest(two)["shards"]
    assert shards.manifest_hash(one) == shards.manifest_hash(two)
    assert shards.verify(one) == []


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_with_one_and_two_workers(tmp_path_factory.mktemp("artic"), variant="articulated",
                                         n=24, val=4, test=8, size=32, shard_size=10)


def test_any_worker_count_gives_the_same_shards_and_verify_passes(made):
    assert_same_shards_and_verified(*made[:2])


def test_manifest_names_the_slots_and_readers_use_them(made):
    one, _, kw = made
    m = shards.read_manifest(one)
    assert m["slots"] == list(figure.PARTS) and m["classes"] == ["figure"]
    assert m["parents"][0] is None and m["parents"][3] == "left_upper_arm"
    assert set(m["groups"]["left leg"]) == {"left_upper_leg", "left_lower_leg"}
    split = open_split(one, "train")
    assert split.slots == figure.PARTS
    data = read_split(one, "train", ("amodal", "present", "pose", "joint_angle", "depth"))
    assert data["amodal"].shape == (24, 2, S, 32, 32) and data["present"].all()
    assert data["joint_angle"].shape == (24, 2, S) and data["depth"].shape == (24, S)


def test_sample_regenerates_alone_from_seed_split_index(made):
    one, _, kw = made
    config = MakeConfig(**kw, out=str(one))
    stored = read_split(one, "test", schema.REQUIRED_FIELDS + ("joint_angle", "depth"))
    for i in (0, 5, 7):
        fresh = make_sample(config, "test", i)
        schema.check_sample(fresh, frames=2, size=32, slots=S)
        for name, arr in stored.items():
            assert np.array_equal(arr[i], fresh[name]), name
    other = make_sample(MakeConfig(**{**kw, "seed": 1}), "test", 0)
    assert not np.array_equal(other["frames"], stored["frames"][0])
