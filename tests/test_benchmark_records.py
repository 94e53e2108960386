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
                metrics={"amodal_iou": {"all": 0.9}}, config={"lr": 1e-3},
                data={"manifest_hash": "abc"}, checkpoint="runs/x/last.pt", device="cpu",
                wall={"total": 1.0}, started_at=records.now(), command="flowbench run flowcaps")
    base.update(over)
    return records.make_record(**base)


def test_record_round_trip_name_and_contents(tmp_path):
    rec = _record()
    path = records.write_record(tmp_path, rec)
    assert path.name == "flowcaps_geoplus_quick_K4_seed1.json"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    assert stat.S_IMODE(path.stat().st_mode) == records.public_mode()  # not owner-only
    back = records.read_record(path)
    assert back["metrics"] == {"amodal_iou": {"all": 0.9}}
    assert back["record_version"] == records.RECORD_VERSION
    assert back["axes"]["decoder_depth"] == 3 and back["variant"]["shape_dim"] is None
    for key in ("git", "machine", "wall_s", "command", "started_at", "finished_at", "data"):
        assert key in back
    assert back["machine"]["cpu"] and back["machine"]["cpu_count"] >= 1


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


def test_load_records_reports_problems_and_empty_folders(tmp_path):
    with pytest.raises(BenchmarkError, match="does not exist"):
        records.load_records(tmp_path / "missing")
    with pytest.raises(BenchmarkError, match="no usable result records"):
        records.load_records(tmp_path)
    (tmp_path / "old.json").write_text(json.dumps({**_record(), "record_version": 0}))
    with pytest.raises(BenchmarkError, match="older record_version"):
        records.load_records(tmp_path)
    records.write_record(tmp_path, _record(variant=Axes()))
    recs, problems = records.load_records(tmp_path)
    assert len(recs) == 1 and len(problems) == 1 and "old.json" in problems[0]


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
