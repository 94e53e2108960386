"""kmeans-flow, the calibration that clusters the exact flow, and the runner's path for a method
that trains nothing (`train = None`)."""
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from benchmark.cli import main
from benchmark.errors import BenchmarkError
from benchmark.metrics import SegmentationScore
from benchmark.registry import Axes, TrainSpec, get_method, untrained

SIDE = 12


def _three_regions(flip: bool) -> tuple[np.ndarray, np.ndarray]:
    """A (2, H, W) flow of three rigid regions (left third, middle, right) and its (H, W)
    label map 1..3; `flip` swaps the outer two regions' flows and labels."""
    flows = [(2.0, 0.0), (0.0, -3.0), (-1.5, 1.5)]
    labels = np.repeat(np.array([1, 2, 3]), SIDE // 3)[None, :].repeat(SIDE, 0)  # (H, W)
    if flip:
        labels = 4 - labels
    flow = np.zeros((2, SIDE, SIDE), np.float32)
    for s, (dx, dy) in enumerate(flows, start=1):
        flow[0][labels == s], flow[1][labels == s] = dx, dy
    return flow, labels.astype(np.uint8)


def test_three_known_regions_score_per_image_iou_one():
    """Hand-made: two images of three regions, each moving rigidly with its own flow; k = 3
    clusters find each region exactly, so every slot's per-image IoU is 1."""
    method = get_method("kmeans-flow")
    (f0, l0), (f1, l1) = _three_regions(False), _three_regions(True)
    flow, labels = np.stack([f0, f1]), np.stack([l0, l1])  # (2, 2, H, W), (2, H, W)
    img = np.zeros((2, 3, SIDE, SIDE), np.float32)  # never read: the flow is its input
    pred = method.predict({"clusters": 3, "random_state": 0}, img, img, gt_flow=flow)
    pred.check(2, SIDE)
    assert pred.masks.shape == (2, 3, SIDE, SIDE) and np.array_equal(pred.masks, pred.visible)
    assert np.array_equal(pred.masks.sum(1), np.ones((2, SIDE, SIDE)))  # one cluster a pixel
    amodal = np.stack([labels == s for s in (1, 2, 3)], 1)  # (2, 3, H, W)
    score = SegmentationScore(K=3, names=("a", "b", "c"))
    score.update(pred.masks, pred.visible, amodal, labels, np.ones((2, 3), bool))
    out = score.compute()
    assert out["visible_iou_per_image"] == pytest.approx({"a": 1, "b": 1, "c": 1, "all": 1})
    with pytest.raises(BenchmarkError, match="kmeans-flow clusters the ground-truth flow"):
        method.predict({"clusters": 3, "random_state": 0}, img, img)


def test_k_is_the_datas_parts_and_background_and_the_seed_is_the_runs():
    method = get_method("kmeans-flow")
    geo = TrainSpec(dataset="geo", profile="quick", seed=11, data_root=Path("x"),
                    run_dir=Path("x"), image_size=64)
    figure = TrainSpec(dataset="articulated", profile="quick", seed=11, data_root=Path("x"),
                       run_dir=Path("x"), image_size=64,
                       slots=tuple(f"part{i}" for i in range(10)))
    assert method.config(geo)["clusters"] == 4 and method.config(figure)["clusters"] == 11
    loaded = untrained(method, geo)
    assert loaded.model["random_state"] == 11 and loaded.axes == Axes(num_capsules=4)
    assert method.train is None and method.tables == (1,) and not method.amodal
    with pytest.raises(BenchmarkError, match="trains nothing and has no checkpoint"):
        method.load(Path("any.pt"))


def test_a_method_that_trains_nothing_may_not_fill_table_2(register_toy):
    with pytest.raises(ValueError, match="method 'toy-bad'.*trains nothing.*tables may not "
                                         "name 2"):
        register_toy(name="toy-bad", train=None, tables=(1, 2))


def test_run_scores_it_with_no_checkpoint_and_refuses_one(tiny_geo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    res = runner.invoke(main, ["run", "kmeans-flow", "--profile", "smoke", "--data",
                               str(tiny_geo), "--checkpoint", str(tiny_geo / "manifest.json")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip().endswith("kmeans-flow trains nothing and has no checkpoint: run "
                                       "it without --checkpoint")
    res = runner.invoke(main, ["run", "kmeans-flow", "--profile", "smoke", "--data",
                               str(tiny_geo)])
    assert res.exit_code == 0, res.output
    assert "it trains nothing" in res.output
    rec = json.loads(Path("runs/records/geo/kmeans-flow/smoke/seed0-test16.json").read_text())
    assert rec["checkpoint"] is None and rec["checkpoint_sha256"] is None
    assert rec["checkpoint_note"] == "kmeans-flow trains nothing: no checkpoint"
    assert rec["config"]["train"]["clusters"] == 4 and rec["uses_ground_truth"] == ["flow"]
    m = rec["metrics"]
    assert "kmeans_4" not in m and "n_train_features" not in m and m["n_test"] == 16
    # the exact flow's clusters find the parts per image; a cluster's index is k-means' start's,
    # not a kind of part's, so the fixed assignment scores lower
    assert m["visible_iou"]["all"] < m["visible_iou_per_image"]["all"]
    assert m["visible_iou_per_image"]["all"] > 0.9
    assert not Path("runs/flowbench").exists()  # no run folder: nothing trained
