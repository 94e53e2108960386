import json

from click.testing import CliRunner

from benchmark import records
from benchmark.cli import main
from benchmark.registry import Axes


def _write(results, **over):
    rec = records.make_record(
        method="flowcaps", dataset="geo", profile="quick", seed=0, run_seed=1,
        axes=Axes(8, 27, 3, True), variant=Axes(),
        metrics={"amodal_iou": {"circle": 0.9, "square": 0.8, "triangle": 0.7, "all": 0.85},
                 "kmeans_4": 0.5, "kmeans_100": 0.6},
        config={}, data={"supersample": 5}, checkpoint=None, device="cpu", wall={}, started_at=records.now(),
        command="flowbench run flowcaps")
    rec.update(over)
    return records.write_record(results, rec)


def test_table_from_records_in_every_format(tmp_path):
    _write(tmp_path)
    runner = CliRunner()
    md = runner.invoke(main, ["table", "--results", str(tmp_path)])
    assert md.exit_code == 0, md.output
    assert "| Geo | all | - | ? | - | ? | 0.850 (quick) | 0.95 |" in md.output
    tex = runner.invoke(main, ["table", "--results", str(tmp_path), "--format", "latex"])
    assert tex.exit_code == 0 and "\\toprule" in tex.output
    out = tmp_path / "t" / "tables.csv"
    res = runner.invoke(main, ["table", "--results", str(tmp_path), "--format", "csv", "-o", str(out)])
    assert res.exit_code == 0 and out.read_text().startswith("table,row,column")


def test_table_errors_are_one_line_and_non_zero(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["table", "--results", str(tmp_path)])
    assert res.exit_code == 1 and "no usable result records" in res.output
    assert "Traceback" not in res.output
    (tmp_path / "old.json").write_text(json.dumps({"record_version": 0, "method": "flowcaps"}))
    res = runner.invoke(main, ["table", "--results", str(tmp_path)])
    assert res.exit_code == 1 and "older record_version 0" in res.output
    _write(tmp_path)
    res = runner.invoke(main, ["table", "--results", str(tmp_path)])
    assert res.exit_code == 0 and "skipped:" in res.output  # the old one is named, not hidden


def test_run_rejects_bad_input_before_any_work(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["run", "nosuchmethod", "--results", str(tmp_path)])
    assert res.exit_code == 1 and "unknown method 'nosuchmethod'" in res.output
    assert "flowcaps" in res.output  # the message lists what is registered
    res = runner.invoke(main, ["run", "flowcaps", "--dataset", "mnist"])
    assert res.exit_code == 2 and "mnist" in res.output
    res = runner.invoke(main, ["run", "flowcaps", "--profile", "huge"])
    assert res.exit_code == 1 and "unknown profile 'huge'" in res.output
    res = runner.invoke(main, ["run", "flowcaps", "--seeds", "0,x"])
    assert res.exit_code == 1 and "--seeds" in res.output
    assert not any(tmp_path.iterdir())


def test_show_refuses_missing_source_and_list_names_methods(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["show", str(tmp_path / "none.pt"), "-o", str(tmp_path / "f.png")])
    assert res.exit_code == 1 and "does not exist" in res.output
    res = runner.invoke(main, ["list"])
    assert res.exit_code == 0 and "flowcaps" in res.output and "geo+" in res.output
    assert "smoke" not in res.output  # the tiny test profile stays unlisted
