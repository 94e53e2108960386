import json
import stat

import pytest

from benchmark import records
from benchmark.errors import BenchmarkError
from benchmark.registry import Axes
from benchmark.runner import derive_seed


def _record(**over):
    base = dict(method="flowcaps", dataset="geo+", profile="quick", seed=1, run_seed=7,
                axes=Axes(8, 27, 3, True), variant=Axes(num_capsules=4),
                metrics={"amodal_iou": {"all": 0.9}, "segmentation_rule": 2},
                config={"lr": 1e-3},
                data={"manifest_hash": "abc"}, checkpoint="runs/x/last.pt", device="cpu",
                wall={"total": 1.0}, started_at=records.now(), command="flowbench run flowcaps")
    base.update(over)
    return records.make_record(**base)


def test_record_round_trip_place_and_contents(tmp_path):
    rec = _record()
    path = records.write_record(tmp_path, rec)
    assert path == tmp_path / "geoplus" / "flowcaps" / "quick" / "K4-seed1.json"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    assert stat.S_IMODE(path.stat().st_mode) == records.public_mode()  # not owner-only
    back = records.read_record(path)
    assert back["metrics"] == {"amodal_iou": {"all": 0.9}, "segmentation_rule": 2}
    assert back["record_version"] == records.RECORD_VERSION
    assert back["axes"]["decoder_depth"] == 3 and back["variant"]["shape_dim"] is None
    for key in ("git", "machine", "wall_s", "command", "started_at", "finished_at", "data"):
        assert key in back
    assert back["machine"]["cpu"] and back["machine"]["cpu_count"] >= 1
    # the flags that decide torch's CPU kernels, and what restricts them
    assert set(back["machine"]["cpu_flags"]) == set(records.CPU_FLAGS)
    assert set(records.ISA_ENV) <= set(back["machine"])
    assert (back["uses_ground_truth"], back["amodal"], back["partial"]) == ([], True, False)


def test_a_record_is_never_replaced_without_force(tmp_path):
    path = records.write_record(tmp_path, _record())
    with pytest.raises(BenchmarkError, match="exists; --force replaces it"):
        records.write_record(tmp_path, _record(metrics={"amodal_iou": {"all": 0.1}}))
    assert records.read_record(path)["metrics"]["amodal_iou"]["all"] == 0.9
    records.write_record(tmp_path, _record(metrics={"amodal_iou": {"all": 0.1}}), force=True)
    assert records.read_record(path)["metrics"]["amodal_iou"]["all"] == 0.1
    part = records.write_record(tmp_path, _record(test_limit=200))  # partial: its own file
    assert part.name == "K4-seed1-test200.json" and records.read_record(part)["partial"]


def test_records_written_before_the_new_fields_read_with_their_defaults(tmp_path):
    old = {k: v for k, v in _record().items()
           if k not in ("partial", "uses_ground_truth", "amodal", "checkpoint_sha256")}
    (tmp_path / "old.json").write_text(json.dumps(old))
    back = records.read_record(tmp_path / "old.json")
    assert (back["partial"], back["uses_ground_truth"], back["amodal"],
            back["checkpoint_sha256"]) == (False, [], True, None)


def test_older_and_foreign_records_are_refused(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**_record(), "record_version": 0}))
    with pytest.raises(BenchmarkError, match="older record_version 0"):
        records.read_record(old)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"hello": 1}))
    with pytest.raises(BenchmarkError, match="no record_version"):
        records.read_record(foreign)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(BenchmarkError, match="not a readable"):
        records.read_record(broken)


def test_load_records_walks_the_tree_and_reports_problems(tmp_path):
    with pytest.raises(BenchmarkError, match="does not exist"):
        records.load_records(tmp_path / "missing")
    with pytest.raises(BenchmarkError, match="no usable result records"):
        records.load_records(tmp_path)
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "old.json").write_text(json.dumps({**_record(), "record_version": 0}))
    with pytest.raises(BenchmarkError, match="older record_version"):
        records.load_records(tmp_path)
    records.write_record(tmp_path, _record(variant=Axes()))
    records.write_record(tmp_path / "elsewhere", _record(seed=2))  # any depth is read
    recs, problems = records.load_records(tmp_path)
    assert sorted(r["seed"] for r in recs) == [1, 2]
    assert len(problems) == 1 and "old.json" in problems[0]


def test_load_records_names_and_skips_records_of_an_older_segmentation_rule(tmp_path):
    records.write_record(tmp_path, _record(seed=0))
    records.write_record(tmp_path, _record(seed=1, metrics={"amodal_iou": {"all": 0.5}}))
    records.write_record(tmp_path, _record(seed=2, metrics={"amodal_iou": {"all": 0.5},
                                                            "segmentation_rule": 1}))
    recs, problems = records.load_records(tmp_path)
    assert [r["seed"] for r in recs] == [0]
    assert len(problems) == 2 and all("scored under segmentation rule 1" in p for p in problems)


def test_load_records_skips_records_of_data_made_with_another_subsample_count(tmp_path):
    records.write_record(tmp_path, _record(seed=0, data={"supersample": 5}))
    records.write_record(tmp_path, _record(seed=1, data={"supersample": 4}))
    records.write_record(tmp_path, _record(seed=2, data={}))  # imported data: no count
    recs, problems = records.load_records(tmp_path)
    assert sorted(r["seed"] for r in recs) == [0, 2]
    assert len(problems) == 1 and "data of 4 x 4 edge subsamples (geogen makes 5 x 5" in problems[0]


def test_a_later_root_shadows_the_same_run_and_is_marked_local(tmp_path):
    committed, local = tmp_path / "committed", tmp_path / "local"
    records.write_record(committed, _record(seed=0))
    records.write_record(committed, _record(seed=1))
    records.write_record(local, _record(seed=1, metrics={"amodal_iou": {"all": 0.5},
                                                         "segmentation_rule": 2}))
    recs, _ = records.load_records([committed, local, tmp_path / "absent"])
    by_seed = {r["seed"]: r for r in recs}
    assert by_seed[1]["metrics"]["amodal_iou"]["all"] == 0.5 and by_seed[1]["_local"]
    assert by_seed[0]["metrics"]["amodal_iou"]["all"] == 0.9


def test_the_committed_records_are_the_tables_records(in_repo):
    """results/records is the tree the tables read by default; nothing there is partial."""
    recs, problems = records.load_records(records.COMMITTED)
    assert recs and not problems
    assert not any(r["_local"] for r in recs)


def test_derive_seed_is_stable_and_separates_methods_and_datasets():
    a = derive_seed(0, "flowcaps", "geo")
    assert a == derive_seed(0, "flowcaps", "geo")
    others = {derive_seed(1, "flowcaps", "geo"), derive_seed(0, "psd", "geo"),
              derive_seed(0, "flowcaps", "geo+")}
    assert a not in others and len(others) == 3
    assert all(0 <= s < 2 ** 31 for s in others | {a})


def test_git_state_outside_a_checkout_takes_the_senders_commit(tmp_path, monkeypatch):
    monkeypatch.delenv(records.SOURCE_COMMIT_ENV, raising=False)
    assert records.git_state(tmp_path) == {"commit": None, "dirty": None}
    monkeypatch.setenv(records.SOURCE_COMMIT_ENV, "abc123")
    state = records.git_state(tmp_path)
    assert state["commit"] == "abc123" and state["dirty"] is None
    # inside a checkout the checkout's own commit wins
    assert records.git_state()["commit"] != "abc123"


def test_a_record_names_the_code_at_its_start_and_a_change_during_the_run(monkeypatch):
    start = {"commit": "aaa", "dirty": False}
    monkeypatch.setattr(records, "git_state", lambda root=None: dict(start))
    assert _record(git=start)["git"] == start  # unchanged: no flag
    monkeypatch.setattr(records, "git_state", lambda root=None: {"commit": "bbb", "dirty": False})
    changed = _record(git=start)["git"]
    assert changed == {"commit": "aaa", "dirty": False,
                       "at_end": {"commit": "bbb", "dirty": False}}
