"""The scae and flowscae adapters beyond the registry contract: figure maps and provenance."""
import numpy as np
import pytest

from benchmark.errors import BenchmarkError
from benchmark.registry import TrainSpec, get_method
from benchmark.datasets import to_images

SIZE = 32  # tests/conftest.py's tiny_geo


def _spec(tiny_geo, tmp_path):
    return TrainSpec(dataset="geo", profile="smoke", seed=1, data_root=tiny_geo,
                     run_dir=tmp_path / "run", image_size=SIZE, device="cpu")


def _images(tiny_geo, n=3):
    from geogen.dataset import read_split
    frames = read_split(tiny_geo, "test", ("frames",), limit=n)["frames"]
    return to_images(frames[:, 0]), to_images(frames[:, 1])


def test_scae_gives_its_placed_templates_and_object_presences(tiny_geo, tmp_path):
    method = get_method("scae")
    loaded = method.load(method.train(_spec(tiny_geo, tmp_path)))
    img0, img1 = _images(tiny_geo)
    pred = method.predict(loaded.model, img0, img1, gt_flow=np.zeros((3, 2, SIZE, SIZE)))
    n_parts, n_objects = loaded.config["pcae"]["n_parts"], loaded.config["ocae"]["n_objects"]
    assert pred.flow is None and pred.features.shape == (3, n_objects)
    assert np.all((pred.features >= 0) & (pred.features <= 1))  # presences
    templates = pred.extras["templates"]
    assert templates.shape == (3, n_parts, SIZE, SIZE)
    assert templates.min() >= 0 and templates.max() <= 1
    assert pred.extras["reconstruction"].shape == (3, 3, SIZE, SIZE)
    # the parts' responsibilities and the background's add up to one at every pixel
    assert np.all(pred.visible.sum(1) <= 1 + 1e-5)


def test_flowscae_refuses_another_flowcaps_checkpoint(tiny_geo, tmp_path):
    method = get_method("flowscae")
    spec = _spec(tiny_geo, tmp_path)
    checkpoint = method.train(spec)
    loaded = method.load(checkpoint)
    assert loaded.config["parts"]["n_parts"] == loaded.model.flow.config.num_capsules
    img0, img1 = _images(tiny_geo)
    pred = method.predict(loaded.model, img0, img1)
    assert pred.features.shape == (3, loaded.config["ocae"]["n_objects"])
    flow_ckpt = spec.run_dir / "flowcaps" / "model.pt"
    with open(flow_ckpt, "ab") as f:
        f.write(b"\0")  # the same path, another file
    with pytest.raises(BenchmarkError, match="sha256 differs"):
        method.load(checkpoint)
    flow_ckpt.unlink()
    with pytest.raises(BenchmarkError, match="does not exist here"):
        method.load(checkpoint)
