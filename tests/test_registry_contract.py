"""Every registered method trains a few steps on a tiny Geo set, loads, predicts and scores.

A new baseline that registers itself is tested here with no new test code.
"""
import dataclasses
import json

import numpy as np
import pytest

from benchmark.datasets import to_flow, to_images
from benchmark.errors import BenchmarkError
from benchmark.evaluate import evaluate
from benchmark.profiles import PROFILES
from benchmark.registry import TrainSpec, get_method, load_methods, untrained

SIZE = 32  # tests/conftest.py's tiny_geo


@pytest.mark.parametrize("name", sorted(load_methods()))
def test_method_contract(name, tiny_geo, tmp_path):
    from geogen.dataset import read_split
    method = get_method(name)
    spec = TrainSpec(dataset="geo", profile="smoke", seed=3, data_root=tiny_geo,
                     run_dir=tmp_path / "run", image_size=SIZE, device="cpu")
    json.dumps(method.config(spec))  # the record stores it: it must be JSON-ready
    if method.train is None:  # it trains nothing: its config is its model (registry.untrained)
        loaded = untrained(method, spec)
    else:
        checkpoint = method.train(spec)
        assert checkpoint.is_file()
        loaded = method.load(checkpoint)
    assert loaded.image_size == SIZE
    json.dumps(loaded.config)

    test = read_split(tiny_geo, "test", ("frames", "flow"), limit=3)
    frames = test["frames"]
    img0, img1 = to_images(frames[:, 0]), to_images(frames[:, 1])
    gt = {"gt_flow": to_flow(test["flow"][:, 0])} if "flow" in method.uses_ground_truth else {}
    pred = method.predict(loaded.model, img0, img1, **gt)
    pred.check(3, SIZE)
    if not gt:  # every method takes the keyword, whether or not it reads it
        method.predict(loaded.model, img0, img1, gt_flow=None).check(3, SIZE)
    assert pred.masks.min() >= 0 and pred.masks.max() <= 1 and pred.visible.min() >= 0
    again = method.predict(loaded.model, img0, img1, **gt)
    assert np.array_equal(pred.masks, again.masks)  # inference is deterministic
    assert np.allclose(method.embed(loaded.model, img0, **gt), pred.features, atol=1e-5)

    m = evaluate(method, loaded, tiny_geo, random_state=0, test_limit=8, progress=False)
    for key in ("amodal_iou", "amodal_iou_per_image", "visible_iou", "visible_iou_per_image"):
        assert 0.0 <= m[key]["all"] <= 1.0
    # Per-image matching can only do as well as or better than one fixed assignment.
    assert m["amodal_iou_per_image"]["all"] >= m["amodal_iou"]["all"] - 1e-9
    assert len(set(m["assignment"].values())) == 3
    assert -1.0 <= m["fg_ari"] <= 1.0 and m["n_test"] == 8
    if method.train is None:  # nothing learned: no k-means protocol, no Table 2
        assert "kmeans_4" not in m and 2 not in method.tables
    else:
        assert 0.0 <= m["kmeans_4"] <= 1.0 and m["n_train_features"] == 48


@pytest.mark.parametrize("name", sorted(load_methods()))
def test_method_refuses_missing_and_corrupt_checkpoints(name, tmp_path):
    method = get_method(name)
    # one that trains nothing refuses every checkpoint, naming why
    missing = "trains nothing" if method.train is None else "does not exist"
    with pytest.raises(BenchmarkError, match=missing):
        method.load(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(BenchmarkError):
        method.load(bad)


@pytest.mark.parametrize("name", sorted(load_methods()))
def test_method_declares_its_profiles_and_what_it_sees(name):
    method = get_method(name)
    assert {"smoke", "quick"} <= set(method.budgets) <= set(PROFILES)
    assert all(isinstance(b, str) and b for b in method.budgets.values())
    assert set(method.uses_ground_truth) <= {"flow"} and isinstance(method.amodal, bool)
    assert set(method.tables) <= {1, 2} and method.clip_frames >= 2


def test_every_profile_has_a_flowcaps_config_at_its_image_size():
    import flowcaps
    for name, profile in PROFILES.items():
        if name == "smoke":
            continue  # the adapter scales the quick profile down (test_benchmark_flowcaps)
        cfg = flowcaps.PROFILES[name](out="x")
        cfg.validate()
        assert cfg.model.image_size == profile.size
    # the gpu profile is the quick model with a GPU-sized batch, less the two switches its
    # records predate
    quick, gpu = flowcaps.PROFILES["quick"](out="x"), flowcaps.PROFILES["gpu"](out="x")
    pinned = {"layering": gpu.model.layering, "shape_code": gpu.model.shape_code}
    assert gpu.model == dataclasses.replace(quick.model, **pinned)
    assert gpu.loop.batch_size > quick.loop.batch_size
    # the long profile is the quick one with a longer budget and the slow-flow prior, which
    # holds back the halo that a longer run grows (docs/deviations.md)
    long = flowcaps.PROFILES["long"](out="x")
    assert long.loop.rows > quick.loop.rows and long.w_slow > quick.w_slow == 0
    assert long.replace(rows=quick.loop.rows, w_slow=quick.w_slow) == quick


@pytest.mark.parametrize("attrs, message", [
    ({"budgets": {"quick": "a minute"}}, "include smoke and quick"),
    ({"budgets": {"smoke": "s", "quick": "q", "huge": "h"}}, "known profiles"),
    ({"uses_ground_truth": ("depth",)}, "uses_ground_truth may name"),
    ({"tables": (3,)}, "tables may name"),
    ({"clip_frames": 1}, "clip_frames must be"),
    ({"trains_with": {"geo+": ("geo+",)}}, "trains_with must map"),
    ({"trains_with": {"geo+": "geo"}}, "trains_with must map"),
    ({"trains_with": {"mnist": ("geo",)}}, "trains_with must map"),
])
def test_a_bad_declaration_fails_at_registration_naming_the_method(attrs, message,
                                                                   register_toy):
    with pytest.raises(ValueError, match=f"method 'toy-bad'.*{message}"):
        register_toy(name="toy-bad", **attrs)
    assert "toy-bad" not in load_methods()


def test_a_method_leaving_the_new_attributes_out_gets_their_defaults(register_toy):
    m = register_toy(name="toy-bare")  # the toy class states only its budgets
    assert (m.uses_ground_truth, m.amodal, m.tables, m.clip_frames) == ((), True, (1, 2), 2)


def test_the_shared_adapter_glue_refuses_in_one_line(tmp_path):
    """benchmark.methods.glue: a missing checkpoint, a method's own error, axes a method lacks."""
    from benchmark.methods.glue import checkpoint_file, one_line, refuse_axes
    from benchmark.registry import Axes
    with pytest.raises(BenchmarkError, match=f"checkpoint {tmp_path / 'x.pt'} does not exist"):
        checkpoint_file(tmp_path / "x.pt")
    with pytest.raises(BenchmarkError, match="^mine training: it broke$"):
        with one_line((KeyError, ValueError), "mine training"):
            raise ValueError("it broke")
    refuse_axes("rnem", Axes(num_capsules=4), allowed=("num_capsules",))  # allowed: no error
    with pytest.raises(BenchmarkError, match="rnem has no Table 3 axes shape_dim; it varies only "
                                             "num_capsules"):
        refuse_axes("rnem", Axes(num_capsules=4, shape_dim=3), allowed=("num_capsules",))


def test_a_method_without_axes_gets_the_default_and_cannot_be_ablated():
    from benchmark.registry import Axes
    from benchmark.runner import RunRequest, ablation_requests
    method = get_method("psd")
    assert method.axes(None) == Axes()
    with pytest.raises(BenchmarkError, match="psd has no Table 3 axes to ablate"):
        ablation_requests(RunRequest(method="psd", dataset="geo", profile="quick"))
