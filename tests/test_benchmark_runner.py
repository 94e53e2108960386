"""The evaluation pipeline on real generated data, with an oracle that returns ground truth."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmark.errors import BenchmarkError
from benchmark.registry import Axes, LoadedModel, Prediction
from benchmark.runner import ensure_dataset, evaluate
from geogen.schema import CLASSES, S

SIZE = 32  # tests/conftest.py's tiny_geo


class Oracle:
    """Answers each call with the next batch of a split's ground truth (in read order)."""

    name, title = "oracle", "Oracle"

    def __init__(self, root):
        from geogen.dataset import read_split
        self.test = read_split(root, "test", ("amodal", "visible", "flow", "label"))
        self.train = read_split(root, "train", ("label",))
        self.i = self.j = 0

    def predict(self, model, img0, img1):
        b, t = len(img0), self.test
        sl = slice(self.i, self.i + b)
        self.i += b
        masks = np.zeros((b, S + 1, SIZE, SIZE), np.float32)  # one spare capsule, never used
        masks[:, 1:] = t["amodal"][sl, 0]  # capsule s + 1 draws slot s
        labels = t["visible"][sl, 0]  # (B, H, W)
        visible = (labels[:, None] == np.arange(S + 1)[None, :, None, None]).astype(np.float32)
        flow = np.moveaxis(t["flow"][sl, 0], -1, 1)  # (B, 2, H, W)
        return Prediction(masks, visible, flow, np.eye(len(CLASSES))[t["label"][sl]])

    def embed(self, model, img0):
        sl = slice(self.j, self.j + len(img0))
        self.j += len(img0)
        return np.eye(len(CLASSES))[self.train["label"][sl]]


def test_oracle_scores_perfectly(tiny_geo):
    oracle = Oracle(tiny_geo)
    loaded = LoadedModel(model=None, config={}, axes=Axes(), image_size=SIZE)
    m = evaluate(oracle, loaded, tiny_geo, random_state=0, progress=False)
    assert m["assignment"] == {"circle": 1, "square": 2, "triangle": 3}
    for key in ("amodal_iou", "amodal_iou_per_image", "visible_iou", "visible_iou_per_image"):
        assert m[key]["all"] == pytest.approx(1.0), key
    assert m["epe"] == pytest.approx(0.0, abs=1e-6) and m["epe_fg"] == pytest.approx(0.0, abs=1e-6)
    assert m["fg_ari"] == pytest.approx(1.0)
    assert m["kmeans_4"] == 1.0 and m["kmeans_100"] is None  # 48 train pairs < 100 clusters
    assert m["count"]["circle"] == 16  # the circle is in every image


def test_mismatched_image_size_and_dataset_are_refused(tiny_geo):
    loaded = LoadedModel(model=None, config={}, axes=Axes(), image_size=64)
    with pytest.raises(BenchmarkError, match="expects 64 px"):
        evaluate(Oracle(tiny_geo), loaded, tiny_geo, random_state=0, progress=False)
    with pytest.raises(BenchmarkError, match="holds geo at 32 px"):
        ensure_dataset("geo", "quick", tiny_geo)  # quick needs 64 px
    assert ensure_dataset("geo", "smoke", tiny_geo) == tiny_geo  # reused, not remade


def test_a_default_folder_made_with_other_subsamples_is_refused(tmp_path):
    from geogen.make import MakeConfig, make_dataset
    root = make_dataset(MakeConfig(variant="geo", n=4, val=0, test=2, size=SIZE, seed=0,
                                   out=str(tmp_path / "geo"), workers=1, supersample=4),
                        progress=False)
    with pytest.raises(BenchmarkError, match="--supersample 4"):
        ensure_dataset("geo", "smoke", root)
    # a folder the user names is taken as it is
    assert ensure_dataset("geo", "smoke", root, default_root=False) == root


def test_run_writes_a_record_and_a_rerun_skips_it(tiny_geo, tmp_path):
    from benchmark.records import read_record
    from benchmark.runner import RunRequest, run
    from geogen.shards import manifest_hash
    req = RunRequest(method="flowcaps", dataset="geo", profile="smoke", seeds=(0,), data=tiny_geo,
                     results=tmp_path / "results", runs=tmp_path / "runs", device="cpu")
    lines = []
    [path] = run(req, progress=False, echo=lines.append)
    rec = read_record(path)
    assert path.name == "flowcaps_geo_smoke_seed0.json"
    assert rec["data"]["manifest_hash"] == manifest_hash(tiny_geo)
    assert rec["config"]["train"]["model"]["image_size"] == SIZE
    assert rec["config"]["trained_with"]["config"]["seed"] == rec["run_seed"]
    assert rec["config"]["trained_with"]["meta"]["pairs"] > 0
    # The paper's K = 8 and |s| = 27, read back from the trained checkpoint.
    assert (rec["axes"]["num_capsules"], rec["axes"]["shape_dim"]) == (8, 27)
    assert any(line.startswith("amodal IoU (fixed assignment): all ") for line in lines)
    lines.clear()
    assert run(req, progress=False, echo=lines.append) == [path]
    assert "record exists, skipping seed 0" in lines[0] and len(lines) == 1
    # --force trains afresh: the old run folder (which a plain run would resume) goes first.
    run_dir = tmp_path / "runs" / "flowcaps_geo_smoke_seed0"
    (run_dir / "marker").write_text("old run")
    lines.clear()
    assert run(replace(req, force=True), progress=False, echo=lines.append) == [path]
    assert not (run_dir / "marker").exists() and (run_dir / "model.pt").is_file()
    assert lines[0].startswith("--force: removing")
    # A record that only evaluated a given checkpoint (no train config) does not count as done.
    from benchmark.runner import _finished
    import json
    assert _finished(path, rec["data"]["manifest_hash"])
    evaluated = dict(rec, config={"train": None, "model": rec["config"]["model"]})
    other = tmp_path / "evaluated.json"
    other.write_text(json.dumps(evaluated))
    assert not _finished(other, rec["data"]["manifest_hash"])


def test_profiles_with_the_same_data_share_one_folder():
    from benchmark.runner import default_data_root
    assert default_data_root("geo", "long") == default_data_root("geo", "gpu") == Path("data/geo-gpu")
    assert default_data_root("geo+", "quick") == Path("data/geoplus-quick")
    assert default_data_root("geo", "paper") == Path("data/geo-paper")  # more val pairs: its own
