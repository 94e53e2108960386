"""The evaluation pipeline and the runner on real generated data.

An oracle that returns ground truth checks the metrics end to end; the toy method of conftest
checks what the runner makes, reads, writes and refuses.
"""
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmark import datasets
from benchmark.errors import BenchmarkError
from benchmark.evaluate import evaluate
from benchmark.registry import Axes, LoadedModel, Prediction
from benchmark.runner import RunRequest, plan, run
from geogen.schema import CLASSES, S

SIZE = 32  # tests/conftest.py's tiny_geo


class Oracle:
    """Answers each call with the next batch of a split's ground truth (in read order)."""

    name, title = "oracle", "Oracle"
    uses_ground_truth = ()
    standardise_features = True

    def __init__(self, root):
        from geogen.dataset import read_split
        self.test = read_split(root, "test", ("amodal", "visible", "flow", "label"))
        self.train = read_split(root, "train", ("label",))
        self.i = self.j = 0

    def predict(self, model, img0, img1, *, gt_flow=None):
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


def _ensure(root, profile="smoke", own=True, may_make=False):
    cfg = datasets.profile_config("geo", profile, root)
    return datasets.ensure(cfg, root, may_make=may_make, own_folder=own)


def test_mismatched_image_size_and_dataset_are_refused(tiny_geo):
    loaded = LoadedModel(model=None, config={}, axes=Axes(), image_size=64)
    with pytest.raises(BenchmarkError, match="expects 64 px"):
        evaluate(Oracle(tiny_geo), loaded, tiny_geo, random_state=0, progress=False)
    with pytest.raises(BenchmarkError, match="holds geo at 32 px"):
        _ensure(tiny_geo, "quick", own=False)  # quick needs 64 px
    assert _ensure(tiny_geo, own=False) == tiny_geo  # a user's folder is used as it is
    with pytest.raises(BenchmarkError, match="this profile makes"):
        _ensure(tiny_geo)  # but the profile's own folder must hold the profile's counts


def test_a_default_folder_made_with_other_subsamples_is_refused(tmp_path):
    from geogen.make import MakeConfig, make_dataset
    root = make_dataset(MakeConfig(variant="geo", n=4, val=0, test=2, size=SIZE, seed=0,
                                   out=str(tmp_path / "geo"), workers=1, supersample=4),
                        progress=False)
    with pytest.raises(BenchmarkError, match="--supersample 4"):
        _ensure(root)
    # a folder the user names is taken as it is
    assert _ensure(root, own=False) == root


def test_a_missing_user_folder_is_an_error_unless_asked_for(tmp_path):
    with pytest.raises(BenchmarkError, match="does not exist; pass --make-data"):
        _ensure(tmp_path / "typo", own=False)
    (tmp_path / "junk").mkdir()
    with pytest.raises(BenchmarkError, match="is not a dataset"):
        _ensure(tmp_path / "junk", own=False)
    with pytest.raises(BenchmarkError, match="--make-data"):
        plan(RunRequest(method="flowcaps", profile="smoke", data=tmp_path / "typo"))
    assert not (tmp_path / "typo").exists()


def test_gt_flow_reaches_only_a_method_that_declares_it(tiny_geo, register_toy):
    loaded = LoadedModel(model=None, config={}, axes=Axes(), image_size=SIZE)
    plain = register_toy(name="toy-plain")
    m = evaluate(plain, loaded, tiny_geo, random_state=0, progress=False)
    assert plain.gt_seen and not any(plain.gt_seen) and m["epe"] is None
    sees = register_toy(name="toy-gt", uses_ground_truth=("flow",))
    m = evaluate(sees, loaded, tiny_geo, random_state=0, progress=False)
    assert all(sees.gt_seen) and m["epe"] == pytest.approx(0.0, abs=1e-6)  # it echoes gt flow


def test_run_writes_a_record_and_never_replaces_one_unasked(tiny_geo, tmp_path):
    from benchmark.records import read_record
    from geogen.shards import manifest_hash
    req = RunRequest(method="flowcaps", dataset="geo", profile="smoke", seeds=(0,), data=tiny_geo,
                     results=tmp_path / "results", runs=tmp_path / "runs", device="cpu")
    lines = []
    [path] = run(req, progress=False, echo=lines.append)
    rec = read_record(path)
    # tiny_geo has 16 test pairs, the smoke profile 60: a partial record, written apart
    assert path == tmp_path / "results" / "geo" / "flowcaps" / "smoke" / "seed0-test16.json"
    assert rec["data"]["manifest_hash"] == manifest_hash(tiny_geo)
    assert rec["config"]["train"]["model"]["image_size"] == SIZE
    assert rec["config"]["trained_with"]["config"]["loop"]["seed"] == rec["run_seed"]
    assert rec["config"]["trained_with"]["meta"]["pairs"] > 0
    assert (rec["uses_ground_truth"], rec["amodal"], rec["partial"]) == ([], True, True)
    from benchmark.records import file_sha256
    assert rec["checkpoint_sha256"] == file_sha256(Path(rec["checkpoint"]))
    # The paper's K = 8 and |s| = 27, read back from the trained checkpoint.
    assert (rec["axes"]["num_capsules"], rec["axes"]["shape_dim"]) == (8, 27)
    assert any(line.startswith("amodal IoU (fixed assignment): all ") for line in lines)
    before = path.read_bytes()
    lines.clear()
    assert run(req, progress=False, echo=lines.append) == [path]
    assert "record exists, skipping seed 0" in lines[0] and len(lines) == 1
    # Evaluating a checkpoint where a record is refuses, before any work.
    with pytest.raises(BenchmarkError, match="exists; --force replaces it"):
        run(replace(req, checkpoint=Path(rec["checkpoint"])), progress=False, echo=lines.append)
    assert path.read_bytes() == before
    # --force trains afresh: the old run folder (which a plain run would resume) goes first.
    run_dir = tmp_path / "runs" / "flowcaps_geo_smoke_seed0"
    (run_dir / "marker").write_text("old run")
    lines.clear()
    assert run(replace(req, force=True), progress=False, echo=lines.append) == [path]
    assert not (run_dir / "marker").exists() and (run_dir / "model.pt").is_file()
    assert lines[0].startswith(f"--force: {run_dir} and its record set aside")


def test_a_partial_evaluation_is_marked_and_written_apart(tiny_geo, tmp_path, monkeypatch,
                                                          register_toy):
    from benchmark.records import load_records, read_record
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    ckpt = tmp_path / "toy.json"
    ckpt.write_text(json.dumps({"size": SIZE}))
    req = RunRequest(method=toy.name, profile="smoke", checkpoint=ckpt, results=Path("r"))
    [part] = run(replace(req, test_limit=5), progress=False, echo=lambda _: None)
    assert part.name == "seed0-test5.json"
    rec = read_record(part)
    assert rec["partial"] and rec["test_limit"] == 5 and rec["metrics"]["n_test"] == 5
    # a --data folder with fewer test pairs than the profile's 60 is partial too
    [small] = run(replace(req, data=tiny_geo), progress=False, echo=lambda _: None)
    assert small.name == "seed0-test16.json" and read_record(small)["test_limit"] is None
    [full] = run(req, progress=False, echo=lambda _: None)
    assert full.name == "seed0.json" and not read_record(full)["partial"]
    recs, problems = load_records(Path("r"))
    assert [r["_path"] for r in recs] == [str(full)]
    assert sum("partial evaluation" in p for p in problems) == 2


def test_scoring_a_checkpoint_makes_only_the_pairs_it_reads(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    ckpt = tmp_path / "toy.json"
    ckpt.write_text(json.dumps({"size": SIZE}))
    req = RunRequest(method=toy.name, profile="smoke", checkpoint=ckpt)
    p = plan(req)
    assert p.train_data is None and p.eval_data.root == Path("data/geo-smoke-eval")
    lines = []
    [path] = run(req, progress=False, echo=lines.append)
    manifest = json.loads(Path("data/geo-smoke-eval/manifest.json").read_text())
    assert manifest["counts"] == {"train": 300, "val": 0, "test": 60}  # smoke: 300 < 10000
    assert not Path("data/geo-smoke").exists()  # no training set
    assert path == Path("runs/records/geo/toy/smoke/seed0.json")  # a user's records folder
    assert any(line.startswith("making geo in data/geo-smoke-eval") for line in lines)


def test_longer_training_clips_get_their_own_folder(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy(clip_frames=3)
    p = plan(RunRequest(method=toy.name, profile="smoke"))
    assert p.eval_data.root == Path("data/geo-smoke") and p.eval_data.make.frames == 2
    assert p.train_data.root == Path("data/geo-smoke-t3") and p.train_data.make.frames == 3
    [path] = run(RunRequest(method=toy.name, profile="smoke"), progress=False,
                 echo=lambda _: None)
    rec = json.loads(path.read_text())
    assert rec["data"]["root"] == "data/geo-smoke" and rec["data"]["train"]["frames"] == 3
    trained_on = json.loads(Path(rec["checkpoint"]).read_text())["data_root"]
    assert trained_on == "data/geo-smoke-t3"


def test_a_method_trains_with_the_other_datasets_it_names(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy(trains_with={"geo+": ("geo",)})
    p = plan(RunRequest(method=toy.name, dataset="geo+", profile="smoke"))
    assert [(name, f.root) for name, f in p.extra_data] == [("geo", Path("data/geo-smoke"))]
    assert p.extra_data[0][1].make.variant == "geo" and "geo's training pairs" in p.budget_line()
    assert plan(RunRequest(method=toy.name, dataset="geo", profile="smoke")).extra_data == ()
    [path] = run(RunRequest(method=toy.name, dataset="geo+", profile="smoke"), progress=False,
                 echo=lambda _: None)
    rec = json.loads(path.read_text())
    assert rec["data"]["root"] == "data/geoplus-smoke"  # tested on its own pairs only
    assert rec["data"]["trains_with"]["geo"]["root"] == "data/geo-smoke"
    assert json.loads(Path(rec["checkpoint"]).read_text())["extra_data"] == {"geo": "data/geo-smoke"}
    # scoring a checkpoint trains nothing, so it makes no other dataset
    ckpt = plan(RunRequest(method=toy.name, dataset="geo+", profile="smoke",
                           checkpoint=Path(rec["checkpoint"]), results=tmp_path / "r2"))
    assert ckpt.extra_data == ()


def test_a_method_is_told_the_slots_its_training_data_names(tmp_path, monkeypatch, register_toy):
    from geogen import figure
    from geogen.make import MakeConfig, make_dataset
    monkeypatch.chdir(tmp_path)
    root = make_dataset(MakeConfig(variant="articulated", n=12, val=0, test=8, size=SIZE,
                                   out=str(tmp_path / "artic"), workers=1), progress=False)
    seen = []
    toy = register_toy(config=lambda self, spec: seen.append(spec.slots) or {})
    [path] = run(RunRequest(method=toy.name, dataset="articulated", profile="smoke", data=root),
                 progress=False, echo=lambda _: None)
    assert seen == [figure.PARTS]
    groups = json.loads(Path(path).read_text())["metrics"]["groups"]
    # the whole limbs, scored by one capsule and by the union of their parts' capsules
    assert set(groups["amodal_iou"]) == set(groups["parts_union"]["amodal_iou"]) == {
        "torso", "left leg", "right leg", "all"}


def test_a_method_refuses_a_profile_it_does_not_support_before_any_work(tmp_path, monkeypatch,
                                                                         register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    with pytest.raises(BenchmarkError, match="does not support profile 'long'; it supports quick"):
        plan(RunRequest(method=toy.name, profile="long"))
    with pytest.raises(BenchmarkError, match="unknown profile 'huge'"):
        plan(RunRequest(method=toy.name, profile="huge"))
    assert not any(tmp_path.iterdir())


def test_profiles_with_the_same_data_share_one_folder():
    from benchmark.profiles import default_data_root
    assert default_data_root("geo", "long") == default_data_root("geo", "gpu") == Path("data/geo-gpu")
    assert default_data_root("geo+", "quick") == Path("data/geoplus-quick")
    assert default_data_root("geo", "paper") == Path("data/geo-paper")  # more val pairs: its own


def test_a_methods_record_extras_land_in_its_record(tiny_geo, tmp_path, monkeypatch, register_toy):
    from benchmark.records import read_record
    monkeypatch.chdir(tmp_path)
    ckpt = tmp_path / "toy.json"
    ckpt.write_text(json.dumps({"size": SIZE}))
    plain = register_toy(name="toy-plain")
    found = register_toy(name="toy-extras", record_extras=lambda self, loaded, root: {
        "probe": {"size": loaded.image_size, "root": Path(root).name}})
    for toy, want in ((plain, {}), (found, {"probe": {"size": SIZE, "root": tiny_geo.name}})):
        req = RunRequest(method=toy.name, profile="smoke", checkpoint=ckpt, data=tiny_geo)
        [path] = run(req, progress=False, echo=lambda _: None)
        assert read_record(path)["extras"] == want
