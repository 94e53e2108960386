"""Training from a real (tiny) geogen folder: rank parts, the public `train`, the benchmark's
evaluation of what it trained."""
import numpy as np
import pytest

import flowcaps
from benchmark.evaluate import evaluate
from benchmark.registry import get_method
from flowcaps import FlowcapsError, checkpoint
from flowcaps.trainer import fit, load_pairs, mix_batch
from geogen.dataset import read_split
from geogen.make import MakeConfig, make_dataset

from test_flowcaps_train import tiny_config


@pytest.fixture(scope="module")
def geo(tmp_path_factory):
    out = tmp_path_factory.mktemp("geo") / "geo32"
    return make_dataset(MakeConfig(n=21, val=2, test=6, size=32, seed=3, out=str(out), workers=1),
                        progress=False)


def test_ranks_read_disjoint_equal_parts(geo):
    whole = read_split(geo, "train", ("frames",))["frames"]  # (21, 2, 32, 32, 3)
    parts = [load_pairs(geo, "train", None, rank, 2) for rank in range(2)]
    assert [len(p) for p in parts] == [10, 10]  # 21 // 2 each, the last clip dropped
    assert np.array_equal(np.concatenate(parts), whole[:20])
    assert np.array_equal(load_pairs(geo, "train", 7)[:, 1], whole[:7, 1])
    with pytest.raises(FlowcapsError, match="not a geogen dataset"):
        load_pairs(geo / "nope")


def test_train_from_folder_and_evaluate(geo, tmp_path):
    cfg = tiny_config(tmp_path / "run", epochs=1)
    path = flowcaps.train(cfg, geo, progress=False)
    method = get_method("flowcaps")  # what `flowbench run flowcaps --checkpoint PATH` scores
    res = evaluate(method, method.load(path), geo, random_state=0, progress=False)
    assert set(res["amodal_iou"]) == {"circle", "square", "triangle", "all"}
    assert 0 <= res["amodal_iou"]["all"] <= 1 and res["count"]["circle"] == 6  # always there
    assert len(set(res["assignment"].values())) == 3  # one distinct capsule per slot


def test_mix_data_trains_on_both_folders(geo, tmp_path):
    other = make_dataset(MakeConfig(n=12, val=1, test=2, size=32, seed=4, out=str(tmp_path / "b"),
                                    workers=1), progress=False)
    cfg = tiny_config(tmp_path / "run", epochs=1, max_pairs=16, mix_data=str(other), mix_first=0.5)
    meta = checkpoint.meta_of(checkpoint.read(flowcaps.train(cfg, geo, progress=False)))
    assert meta["pairs"] == 24  # 16 from DATA (max_pairs) and all 12 of mix_data, 3 batches of 8
    bad = tiny_config(tmp_path / "run2", mix_data=str(tmp_path / "nope"))
    with pytest.raises(FlowcapsError, match="not a geogen dataset"):
        flowcaps.train(bad, geo, progress=False)
    with pytest.raises(FlowcapsError, match="mix_data must name"):
        tiny_config(tmp_path / "run3", mix_data=" ").validate()


def test_mix_first_draws_from_mix_data_only(geo, tmp_path):
    sel = mix_batch(30, 42, 64, seed=5)
    assert sel.min() >= 30 and sel.max() < 42 and len(set(sel.tolist())) > 1
    assert sel.tolist() == mix_batch(30, 42, 64, seed=5).tolist()  # a resumed run draws the same
    for bad in ({"mix_first": 0.3}, {"mix_first": 1.0, "mix_data": str(geo)}):
        with pytest.raises(FlowcapsError, match="mix_first"):
            tiny_config(tmp_path / "r", **bad).validate()
    with pytest.raises(FlowcapsError, match="fit trains on its pairs only"):
        fit(tiny_config(tmp_path / "r", mix_data=str(geo)), np.zeros((8, 2, 32, 32, 3), np.uint8))
