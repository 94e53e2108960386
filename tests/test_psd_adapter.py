"""The `psd` method behind the benchmark protocol: smoke training, prediction with the
ground-truth flow, its refusal without it, and the metrics on its predictions."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from benchmark.errors import BenchmarkError
from benchmark.metrics import FlowScore, SegmentationScore
from benchmark.registry import Axes, TrainSpec, get_method
from benchmark.datasets import to_images

SIZE = 32


@pytest.fixture(scope="module")
def trained(tiny_geo, tmp_path_factory):
    method = get_method("psd")
    spec = TrainSpec(dataset="geo", profile="smoke", seed=3, data_root=tiny_geo,
                     run_dir=tmp_path_factory.mktemp("psd") / "run", image_size=SIZE,
                     device="cpu")
    return method, method.load(method.train(spec)), tiny_geo


def _test_batch(root, n=8):
    from geogen.dataset import read_split
    test = read_split(root, "test", ("frames", "flow", "amodal", "visible", "present"), limit=n)
    gt = np.ascontiguousarray(test["flow"][:, 0].transpose(0, 3, 1, 2))  # (B, 2, H, W)
    return test, to_images(test["frames"][:, 0]), to_images(test["frames"][:, 1]), gt


def test_declares_what_it_sees_and_fills(trained):
    method, loaded, _ = trained
    assert method.uses_ground_truth == ("flow",) and method.amodal is False
    assert method.tables == (1,) and {"smoke", "quick", "gpu"} <= set(method.budgets)
    assert "ground-truth flow" in loaded.config["test_time_input"]
    assert loaded.image_size == SIZE and loaded.axes == Axes()
    kl, threshold = loaded.trained_with["meta"]["kl"], loaded.trained_with["config"]["kl_active"]
    assert loaded.config["active_dims"]
    assert all(kl[d] > threshold for d in loaded.config["active_dims"])  # never a dead one


def test_record_extras_hold_the_probe(trained):
    method, loaded, root = trained
    found = method.record_extras(loaded, root)["psd_probe"]
    assert found["test"]["pairs"] == 16 and found["train"]["pairs"] == 16
    assert found["test"]["active_dims"] == loaded.config["active_dims"]
    a = len(loaded.config["active_dims"])
    assert np.array(found["test"]["structure"]).shape == (a, a)
    assert {d["part"] for d in found["test"]["dims"]} <= {"circle", "square", "triangle"}
    codes = found["test"]["factor_codes"]  # Geo: which part's motion each dimension encodes
    assert [d["dim"] for d in codes["dims"]] == loaded.config["active_dims"]
    assert set(codes["held"]) == {"circle", "square", "triangle"}
    assert all(0 <= r <= 1 for d in codes["dims"] for r in d["r2"].values())


def test_predict_with_the_ground_truth_flow(trained):
    method, loaded, root = trained
    test, img0, img1, gt = _test_batch(root)
    pred = method.predict(loaded.model, img0, img1, gt_flow=gt)
    k = len(loaded.config["active_dims"])
    pred.check(len(img0), SIZE)
    assert pred.masks.shape == (len(img0), k, SIZE, SIZE)
    assert pred.masks.min() >= 0 and pred.masks.max() <= 1
    assert np.array_equal(pred.visible, pred.masks)  # one map per dimension, both roles
    assert pred.features.shape == (len(img0), 32)
    again = method.predict(loaded.model, img0, img1, gt_flow=gt)
    assert np.array_equal(pred.masks, again.masks)  # deterministic: the posterior mean
    assert np.allclose(method.embed(loaded.model, img0, gt_flow=gt), pred.features, atol=1e-5)
    if any(f.name == "extras" for f in dataclasses.fields(pred)):
        motion = pred.extras["motion"]
        assert motion.shape == pred.masks.shape and 0 <= motion.min() and motion.max() <= 1
    seg, flow = SegmentationScore(K=k), FlowScore()
    seg.update(pred.masks, pred.visible, test["amodal"][:, 0], test["visible"][:, 0],
               test["present"])
    flow.update(pred.flow, test["flow"][:, 0], test["visible"][:, 0])
    scores = seg.compute()
    assert 0 <= scores["amodal_iou"]["all"] <= 1 and 0 <= scores["visible_iou"]["all"] <= 1
    assert np.isfinite(flow.compute()["epe"])


def test_predict_and_embed_refuse_to_run_without_the_flow(trained):
    method, loaded, root = trained
    _, img0, img1, gt = _test_batch(root, 2)
    with pytest.raises(BenchmarkError, match="needs the ground-truth flow"):
        method.predict(loaded.model, img0, img1)
    with pytest.raises(BenchmarkError, match="needs the ground-truth flow"):
        method.embed(loaded.model, img0)
    with pytest.raises(BenchmarkError, match="gt_flow must be"):
        method.predict(loaded.model, img0, img1, gt_flow=gt[:, :1])


def test_config_refuses_unknown_profiles_and_ablation_axes(tmp_path):
    method = get_method("psd")
    spec = TrainSpec(dataset="geo", profile="paper", seed=0, data_root=tmp_path,
                     run_dir=tmp_path / "run", image_size=64)
    with pytest.raises(BenchmarkError, match="no profile 'paper'"):
        method.config(spec)
    with pytest.raises(BenchmarkError, match="no Table 3 axes"):
        method.config(dataclasses.replace(spec, profile="quick", variant=Axes(num_capsules=4)))
    cfg = method.config(dataclasses.replace(spec, profile="quick"))
    assert cfg["loop"]["out"] == str(tmp_path / "run") and cfg["model"]["image_size"] == 64


def test_load_refuses_a_checkpoint_of_another_method(tmp_path):
    import torch
    other = tmp_path / "other.pt"
    torch.save({"format": "flowcaps-checkpoint-v1"}, other)
    with pytest.raises(BenchmarkError, match="cannot load"):
        get_method("psd").load(Path(other))


class _TwoParts:
    """PSD's interface around hand-made local motions (what `predict` calls, nothing more)."""

    def __init__(self, local):
        import torch
        self.local = local  # (1, 2, D, H, W)
        self.active = torch.ones(local.shape[2], dtype=torch.bool)
        self.config = type("Cfg", (), {"flow_scale": 1.0})()

    def parameters(self):
        import torch
        return iter([torch.zeros(1)])

    def encode(self, flow):
        import torch
        return torch.zeros(len(flow), self.local.shape[2]), None

    def local_motions(self, image, z):
        return self.local

    def masks(self, local):
        from baselines.psd.model import motion_masks
        return motion_masks(local, 1e-12, 1e-4)  # PSD's own rule, as the model applies it

    def structure(self, local, masks, active):
        return local


def test_each_dimension_is_thresholded_on_its_own_on_a_two_part_case():
    import torch
    left, right = np.zeros((4, 4), bool), np.zeros((4, 4), bool)
    left[:, :2], right[:, 2:] = True, True
    local = torch.zeros(1, 2, 2, 4, 4)
    local[0, 0, 0][torch.from_numpy(left | right)] = 2.0  # a parent moving both parts
    local[0, 0, 1][torch.from_numpy(right)] = 0.5  # a child moving the right one, slower
    img = np.zeros((1, 3, 4, 4), np.float32)
    pred = get_method("psd").predict(_TwoParts(local), img, img,
                                     gt_flow=np.zeros((1, 2, 4, 4), np.float32))
    on = pred.visible[0] > 0.5  # (2, 4, 4)
    # Each dimension over its own maximum: the slow child's part is as full as the parent's.
    assert on[0].tolist() == (left | right).tolist() and on[1].tolist() == right.tolist()
    assert np.array_equal(pred.masks, pred.visible)
    labels = (left * 1 + right * 2).astype(np.uint8)[None]  # circle left, square right
    seg = SegmentationScore(K=2)
    seg.update(pred.masks, pred.visible, np.stack([left, right, left])[None], labels,
               np.array([[1, 1, 0]], bool))
    v = seg.compute()["visible_iou"]
    # The right half is in both masks: the child is the square exactly and the parent's
    # union scores half the circle; shared out at 1/2 each, it would be in neither.
    assert v["square"] == 1.0 and v["circle"] == pytest.approx(0.5)
