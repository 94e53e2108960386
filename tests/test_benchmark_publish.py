"""Committed checkpoints and records point at each other; publish makes such pairs; show draws
a committed record on a fresh clone."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmark import datasets, records
from benchmark.cli import main
from benchmark.errors import BenchmarkError
from benchmark.publish import check_pairs, publish
from benchmark.runner import RunRequest, run


def test_every_committed_checkpoint_and_record_point_at_each_other(in_repo):
    assert check_pairs() == []
    recs = sorted(records.COMMITTED.rglob("*.json"))
    assert recs
    for path in recs:
        rec = records.read_record(path)
        if rec["checkpoint"] is None:  # a method that trains nothing has none (runner)
            from benchmark.registry import get_method
            assert get_method(rec["method"]).train is None
            assert rec["checkpoint_note"] == f"{rec['method']} trains nothing: no checkpoint"
            assert rec["checkpoint_sha256"] is None
        elif rec["checkpoint_sha256"] is None:
            assert rec["checkpoint_note"].startswith("not in the repository")
            assert not rec["checkpoint"].startswith("checkpoints/")
        else:
            assert rec["checkpoint"].startswith("checkpoints/")
            assert records.file_sha256(Path(rec["checkpoint"])) == rec["checkpoint_sha256"]


def test_every_committed_checkpoint_loads_with_the_method_of_its_record(in_repo):
    from benchmark.registry import get_method
    seen = set()
    for path in sorted(records.COMMITTED.rglob("*.json")):
        rec = records.read_record(path)
        if rec["checkpoint_sha256"] is None or rec["checkpoint"] in seen:
            continue
        seen.add(rec["checkpoint"])
        loaded = get_method(rec["method"]).load(Path(rec["checkpoint"]))
        assert loaded.image_size == 64, rec["checkpoint"]
    assert {"checkpoints/psd_geo_quick.pt", "checkpoints/rnem_geo_quick.pt",
            "checkpoints/flowscae_geo_quick.pt"} <= seen


def test_the_quick_checkpoint_names_the_record_it_made(in_repo):
    prov = json.loads(Path("checkpoints/flowcaps_geo_quick.json").read_text())
    [entry] = prov["records"]
    rec = records.read_record(Path(entry["path"]))
    assert entry["path"] == "results/records/geo/flowcaps/quick/seed0.json"
    assert rec["checkpoint"] == "checkpoints/flowcaps_geo_quick.pt"
    assert rec["checkpoint_sha256"] == prov["sha256"] == records.file_sha256(
        Path("checkpoints/flowcaps_geo_quick.pt"))


def test_check_pairs_finds_a_record_that_names_a_checkpoint_its_provenance_does_not(in_repo,
                                                                                   tmp_path):
    committed = tmp_path / "records"
    src = Path("results/records/geo/flowcaps/long/seed0.json")
    copy = committed / "geo" / "flowcaps" / "long" / "seed9.json"
    copy.parent.mkdir(parents=True)
    copy.write_text(src.read_text())
    problems = check_pairs(committed=committed)
    named = records.read_record(src)["checkpoint"]
    assert problems == [f"{copy.as_posix()}: names {named}, whose provenance does not list it"]


def test_check_pairs_finds_a_record_that_names_a_committed_checkpoint_without_its_sha256(
        in_repo, tmp_path):
    committed = tmp_path / "records"
    rec = json.loads(Path("results/records/geo/psd/long/seed0.json").read_text())
    rec.update(checkpoint_sha256=None, checkpoint_note="not in the repository: lost")
    copy = committed / "geo" / "psd" / "long" / "seed9.json"
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps(rec))
    problems = check_pairs(committed=committed)
    assert problems == [f"{copy.as_posix()}: names {rec['checkpoint']} in checkpoints but no "
                        "sha256 for it"]
    rec["checkpoint"] = "/elsewhere/on/this/machine/model.pt"  # a run folder: not the clone's
    copy.write_text(json.dumps(rec))
    assert check_pairs(committed=committed) == []


@pytest.fixture
def toy_run(tmp_path, monkeypatch, register_toy):
    """A toy run's record under results/records of a fresh folder (the working directory)."""
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    [path] = run(RunRequest(method=toy.name, profile="smoke", results=records.COMMITTED),
                 progress=False, echo=lambda _: None)
    return toy, path


def test_publish_copies_the_checkpoint_and_points_both_ways(toy_run):
    toy, path = toy_run
    before = records.read_record(path)
    out = publish(path, Path("checkpoints/toy_geo_smoke.pt"), command="flowbench publish")
    assert out["copied"]
    rec = records.read_record(path)
    assert rec["checkpoint"] == "checkpoints/toy_geo_smoke.pt"
    assert rec["checkpoint_sha256"] == before["checkpoint_sha256"]
    assert rec["checkpoint_source"] == before["checkpoint"]
    assert rec["metrics"] == before["metrics"]
    prov = json.loads(Path("checkpoints/toy_geo_smoke.json").read_text())
    assert prov["records"] == [{"path": path.as_posix(), "sha256": records.file_sha256(path)}]
    assert prov["training_log"] == "checkpoints/toy_geo_smoke.log.csv"
    assert Path(prov["training_log"]).read_text().startswith("step,loss")
    assert prov["config"] == before["config"] and prov["sha256"] == rec["checkpoint_sha256"]
    assert check_pairs() == []
    assert not list(Path("checkpoints").glob("*.tmp"))
    # publishing it again links (same bytes): nothing is copied, the pair stays whole
    assert not publish(path, Path("checkpoints/toy_geo_smoke.pt"))["copied"]
    assert check_pairs() == []


def test_publish_refuses_what_it_cannot_pair(toy_run):
    toy, path = toy_run
    Path("checkpoints").mkdir()
    Path("checkpoints/taken.pt").write_bytes(b"another model")
    with pytest.raises(BenchmarkError, match="holds another checkpoint; --force"):
        publish(path, Path("checkpoints/taken.pt"))
    assert Path("checkpoints/taken.pt").read_bytes() == b"another model"
    with pytest.raises(BenchmarkError, match="checkpoints/<name>.pt"):
        publish(path, Path("elsewhere/x.pt"))
    rec = records.read_record(path)
    Path(rec["checkpoint"]).write_text('{"size": 32, "changed": true}')
    with pytest.raises(BenchmarkError, match="changed since"):
        publish(path, Path("checkpoints/toy.pt"))
    [part] = run(RunRequest(method=toy.name, profile="smoke", test_limit=3,
                            checkpoint=Path(rec["checkpoint"]), results=records.COMMITTED),
                 progress=False, echo=lambda _: None)
    res = CliRunner().invoke(main, ["publish", str(part), "--as", "checkpoints/toy.pt"])
    assert res.exit_code == 1 and "partial evaluation" in res.output
    assert not Path("checkpoints/toy.pt").exists()


def test_show_draws_a_committed_record_on_a_fresh_clone(in_repo, tmp_path, monkeypatch):
    # its data folder is not here (or holds other data): the first test pairs are made again
    monkeypatch.setattr(datasets, "SHOW_DATA", tmp_path / "show-data")
    out = tmp_path / "fig.png"
    res = CliRunner().invoke(main, ["show", "results/records/geo/flowcaps/gpu/seed0.json",
                                    "-o", str(out), "--pairs", "1"])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    made = json.loads((tmp_path / "show-data" / "geo-64px-ss5-seed0-test16" / "manifest.json")
                      .read_text())
    assert made["config"]["supersample"] == 5  # the record's data: the 5 x 5 subsamples
    # a record of the former 4 x 4 data names a checkpoint the repository no longer holds at
    # that path (the quick checkpoint was trained again on the current data): one line
    old = "experiments/2026-12-07-superseded-records/records/geo-4x4/flowcaps/quick/seed0.json"
    res = CliRunner().invoke(main, ["show", old, "-o", str(tmp_path / "old.png")])
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert "checkpoints/flowcaps_geo_quick.pt is not the checkpoint it names" in res.output


def test_show_names_a_checkpoint_that_is_not_in_the_repository(in_repo, tmp_path):
    path = "results/records/geo/psd/quick/seed1.json"
    missing = records.read_record(Path(path))["checkpoint"]
    assert missing.startswith("runs/")  # a run folder this record's machine did not commit
    res = CliRunner().invoke(main, ["show", path, "-o", str(tmp_path / "f.png")])
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert f"its checkpoint {missing} is not on this machine (not in the repository" in res.output


def test_show_a_checkpoint_makes_the_few_test_pairs_it_needs(in_repo, tmp_path, monkeypatch):
    ckpt = Path("checkpoints/flowcaps_geo_quick.pt").resolve()
    monkeypatch.chdir(tmp_path)  # a fresh clone: no data/ folder
    res = CliRunner().invoke(main, ["show", str(ckpt), "-o", "fig.png", "--pairs", "2"])
    assert res.exit_code == 0, res.output
    assert "making the first 16 test pairs of geo (data seed 0) in runs/show-data" in res.output
    assert Path("fig.png").is_file() and not Path("data").exists()


def test_show_refuses_a_checkpoint_that_is_not_the_one_its_record_names(toy_run, tmp_path):
    toy, path = toy_run
    rec = records.read_record(path)
    Path(rec["checkpoint"]).write_text('{"size": 32, "retrained": true}')
    res = CliRunner().invoke(main, ["show", str(path), "-o", str(tmp_path / "f.png")])
    assert res.exit_code == 1 and "is not the checkpoint it names (sha256 differs)" in res.output


@pytest.fixture
def flowcaps_record(in_repo, tmp_path, monkeypatch):
    """put(CHECKPOINT): a copy of the committed geo flowcaps quick record in a fresh folder (the
    working directory) naming a run's copy of the committed CHECKPOINT, with its sha256."""
    rec = json.loads(Path("results/records/geo/flowcaps/quick/seed0.json").read_text())
    monkeypatch.chdir(tmp_path)

    def put(checkpoint: str) -> Path:
        run_ckpt = Path("runs/x/model.pt")
        run_ckpt.parent.mkdir(parents=True, exist_ok=True)
        run_ckpt.write_bytes((in_repo / checkpoint).read_bytes())
        path = records.COMMITTED / "geo" / "flowcaps" / "quick" / "seed0.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**rec, "checkpoint": run_ckpt.as_posix(),
                                    "checkpoint_sha256": records.file_sha256(run_ckpt)}))
        return path
    return put


def _refused_publish(path: Path, says: str) -> None:
    before = {p: p.read_bytes() for p in Path(".").rglob("*") if p.is_file()}
    res = CliRunner().invoke(main, ["publish", str(path), "--as", "checkpoints/mine.pt"])
    assert res.exit_code == 1, res.output
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    assert says in res.output, res.output
    assert {p: p.read_bytes() for p in Path(".").rglob("*") if p.is_file()} == before
    assert not Path("checkpoints").exists()


def test_publish_refuses_a_checkpoint_of_another_method(flowcaps_record):
    # a PSD checkpoint named by a flowcaps record (its sha256 matching) went in as flowcaps's
    path = flowcaps_record("checkpoints/psd_geo_quick.pt")
    _refused_publish(path, f"{path} is a flowcaps record but its checkpoint runs/x/model.pt is a "
                           f"psd checkpoint; nothing was published")


def test_publish_refuses_a_checkpoint_trained_on_another_dataset(flowcaps_record):
    path = flowcaps_record("checkpoints/flowcaps_articulated_quick.pt")
    _refused_publish(path, f"{path} is a geo record but its checkpoint runs/x/model.pt was "
                           f"trained on articulated data; nothing was published")
    # the same record naming a checkpoint of its own method and data is published
    path = flowcaps_record("checkpoints/flowcaps_geo_quick.pt")
    assert publish(path, Path("checkpoints/mine.pt"))["copied"]
    assert records.read_record(path)["checkpoint"] == "checkpoints/mine.pt"


def test_a_publish_that_fails_while_staging_changes_nothing(toy_run, monkeypatch):
    import shutil
    toy, path = toy_run
    before = path.read_bytes()
    calls, real_copy = [], shutil.copyfile

    def copy_then_fail(src, dst):
        calls.append(src)
        if len(calls) == 2:  # the training log, after the checkpoint was staged
            raise OSError("disk full")
        return real_copy(src, dst)
    monkeypatch.setattr("benchmark.publish.shutil.copyfile", copy_then_fail)
    with pytest.raises(OSError, match="disk full"):
        publish(path, Path("checkpoints/toy.pt"))
    assert path.read_bytes() == before
    assert sorted(p.name for p in Path("checkpoints").iterdir()) == []  # no temporary left


def test_show_writes_the_type_its_extension_names_and_the_records_assignment(toy_run, tmp_path,
                                                                            monkeypatch):
    """As `geogen show`: .jpg is a JPEG, .png a PNG; .foo or no extension is one line before
    any work, nothing written. A record's figure is scored under the record's assignment."""
    from PIL import Image
    toy, path = toy_run
    for name, fmt in (("f.jpg", "JPEG"), ("f.PNG", "PNG")):
        res = CliRunner().invoke(main, ["show", str(path), "-o", str(tmp_path / name),
                                        "--pairs", "1"])
        assert res.exit_code == 0, res.output
        assert Image.open(tmp_path / name).format == fmt
    for name in ("f.foo", "f"):
        # a missing source too: the extension is refused first
        for source in (str(path), "missing.pt"):
            res = CliRunner().invoke(main, ["show", source, "-o", str(tmp_path / name)])
            assert res.exit_code == 1 and res.output.count("\n") == 1
            assert "unknown image type" in res.output and not (tmp_path / name).exists()
    seen = {}
    monkeypatch.setattr("benchmark.figures.compose", lambda rows, title: seen.setdefault(
        "title", title) and Image.new("RGB", (4, 4)))
    res = CliRunner().invoke(main, ["show", str(path), "-o", str(tmp_path / "g.png"),
                                    "--pairs", "1"])
    assert res.exit_code == 0, res.output
    got = records.read_record(path)["metrics"]["assignment"]
    assert ("capsules by shape (the record's, over 60 test pairs): "
            + ", ".join(f"{n} {got[n]}" for n in ("circle", "square", "triangle"))) in seen["title"]
