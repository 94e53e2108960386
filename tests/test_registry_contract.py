"""Every registered method trains a few steps on a tiny Geo set, loads, predicts and scores.

A new baseline that registers itself is tested here with no new test code.
"""
import dataclasses
import json

import numpy as np
import pytest

from benchmark.errors import BenchmarkError
from benchmark.registry import TrainSpec, get_method, load_methods
from benchmark.runner import evaluate, to_images

SIZE = 32  # tests/conftest.py's tiny_geo


@pytest.mark.parametrize("name", sorted(load_methods()))
def test_method_contract(name, tiny_geo, tmp_path):
    from geogen.dataset import read_split
    method = get_method(name)
    spec = TrainSpec(dataset="geo", profile="smoke", seed=3, data_root=tiny_geo,
                     run_dir=tmp_path / "run", image_size=SIZE, device="cpu")
    json.dumps(method.config(spec))  # the record stores it: it must be JSON-ready
    checkpoint = method.train(spec)
    assert checkpoint.is_file()
    loaded = method.load(checkpoint)
    assert loaded.image_size == SIZE
    json.dumps(loaded.config)

    frames = read_split(tiny_geo, "test", ("frames",), limit=3)["frames"]
    img0, img1 = to_images(frames[:, 0]), to_images(frames[:, 1])
    pred = method.predict(loaded.model, img0, img1)
    pred.check(3, SIZE)
    assert pred.masks.min() >= 0 and pred.masks.max() <= 1 and pred.visible.min() >= 0
    again = method.predict(loaded.model, img0, img1)
    assert np.array_equal(pred.masks, again.masks)  # inference is deterministic
    assert np.allclose(method.embed(loaded.model, img0), pred.features, atol=1e-5)

    m = evaluate(method, loaded, tiny_geo, random_state=0, progress=False)
    for key in ("amodal_iou", "amodal_iou_per_image", "visible_iou", "visible_iou_per_image"):
        assert 0.0 <= m[key]["all"] <= 1.0
    # Per-image matching can only do as well as or better than one fixed assignment.
    assert m["amodal_iou_per_image"]["all"] >= m["amodal_iou"]["all"] - 1e-9
    assert len(set(m["assignment"].values())) == 3
    assert -1.0 <= m["fg_ari"] <= 1.0 and 0.0 <= m["kmeans_4"] <= 1.0
    assert m["n_test"] == 16 and m["n_train_features"] == 48


@pytest.mark.parametrize("name", sorted(load_methods()))
def test_method_refuses_missing_and_corrupt_checkpoints(name, tmp_path):
    method = get_method(name)
    with pytest.raises(BenchmarkError, match="does not exist"):
        method.load(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(BenchmarkError):
        method.load(bad)


def test_every_listed_profile_has_data_a_duration_and_a_flowcaps_config():
    import flowcaps
    from benchmark.cli import DURATION
    from benchmark.registry import PROFILES
    from benchmark.runner import DATA_PROFILES
    from benchmark.tables import PROFILE_ORDER
    for profile in PROFILES:
        assert profile in DATA_PROFILES and profile in DURATION and profile in PROFILE_ORDER
        cfg = flowcaps.PROFILES[profile](out="x")
        cfg.validate()
        assert cfg.model.image_size == DATA_PROFILES[profile].size
    # the gpu profile is the quick model with a GPU-sized batch, less the two switches its
    # records predate
    quick, gpu = flowcaps.PROFILES["quick"](out="x"), flowcaps.PROFILES["gpu"](out="x")
    pinned = {"layering": gpu.model.layering, "shape_code": gpu.model.shape_code}
    assert gpu.model == dataclasses.replace(quick.model, **pinned)
    assert gpu.batch_size > quick.batch_size
    # the long profile is the quick one with a longer budget, so it measures more training only
    long = flowcaps.PROFILES["long"](out="x")
    assert long.max_minutes > quick.max_minutes
    assert long.replace(max_minutes=quick.max_minutes) == quick
