import json
from pathlib import Path

from click.testing import CliRunner

from benchmark import profiles, records
from benchmark.cli import main
from benchmark.registry import Axes


def _write(results, **over):
    rec = records.make_record(
        method="flowcaps", dataset="geo", profile="quick", seed=0, run_seed=1,
        axes=Axes(8, 27, 3, True), variant=Axes(),
        metrics={"amodal_iou": {"circle": 0.9, "square": 0.8, "triangle": 0.7, "all": 0.85},
                 "kmeans_4": 0.5, "kmeans_100": 0.6, "segmentation_rule": 2},
        config={}, data={"supersample": 5}, checkpoint=None, device="cpu", wall={},
        started_at=records.now(), command="flowbench run flowcaps")
    rec.update(over)
    return records.write_record(results, rec)


def test_table_from_records_in_every_format(tmp_path):
    _write(tmp_path)
    runner = CliRunner()
    md = runner.invoke(main, ["table", "--results", str(tmp_path)])
    assert md.exit_code == 0, md.output
    # fixed / per image: this record holds no per-image number, so that side is "-"
    assert ("| Geo | all | ceiling: - |  | ceiling: - |  | 0.850 / - (quick, local) | 0.95 |"
            in md.output)
    tex = runner.invoke(main, ["table", "--results", str(tmp_path), "--format", "latex"])
    assert tex.exit_code == 0 and "\\toprule" in tex.output
    out = tmp_path / "t" / "tables.csv"
    res = runner.invoke(main, ["table", "--results", str(tmp_path), "--format", "csv", "-o", str(out)])
    assert res.exit_code == 0 and out.read_text().startswith("table,row,column")
    only = runner.invoke(main, ["table", "--results", str(tmp_path), "--profile", "long"])
    assert only.exit_code == 0 and "0.850" not in only.output


def test_table_reads_the_committed_tree_and_prints_every_paper_number(in_repo):
    res = CliRunner().invoke(main, ["table", "--results", str(records.COMMITTED)])
    assert res.exit_code == 0, res.output
    long_geo = records.read_record(records.COMMITTED / "geo" / "flowcaps" / "long" / "seed0.json")
    assert "?" not in res.output
    assert f"{long_geo['metrics']['amodal_iou']['all']:.3f} (long)" in res.output


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
    record = next(tmp_path.rglob("*.json"))  # a record file given where its folder is due
    res = runner.invoke(main, ["table", "--results", str(record)])
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
    assert f"{record} is a file, not a folder of records" in res.output
    assert "does not exist" not in res.output


def test_run_rejects_bad_input_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    res = runner.invoke(main, ["run", "nosuchmethod"])
    assert res.exit_code == 1 and res.output.startswith("Error: unknown method 'nosuchmethod'")
    assert "flowcaps" in res.output  # the message lists what is registered
    res = runner.invoke(main, ["run", "flowcaps", "--dataset", "mnist"])
    assert res.exit_code == 2 and "mnist" in res.output
    res = runner.invoke(main, ["run", "flowcaps", "--profile", "huge"])
    assert res.exit_code == 2 and "'huge' is not one of 'quick', 'gpu', 'long', 'paper'" in res.output
    res = runner.invoke(main, ["run", "flowcaps", "--seeds", "0,x"])
    assert res.exit_code == 1 and "--seeds" in res.output
    for bad in ("0", "-5"):
        res = runner.invoke(main, ["run", "flowcaps", "--test-limit", bad])
        assert res.exit_code == 2 and "--test-limit" in res.output and "x>=1" in res.output
    res = runner.invoke(main, ["run", "flowcaps", "--data", "/typo/path"])
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert "data folder /typo/path does not exist; pass --make-data" in res.output
    res = runner.invoke(main, ["run", "flowcaps", "--checkpoint", "none.pt"])
    assert res.exit_code == 1 and "checkpoint none.pt does not exist" in res.output
    assert not any(tmp_path.iterdir())  # no data folder, no record, no run folder


def test_run_refuses_an_unsupported_profile_before_printing_a_budget(tmp_path, monkeypatch,
                                                                    register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    res = CliRunner().invoke(main, ["run", toy.name, "--profile", "gpu"])
    assert res.exit_code == 1
    assert res.output == f"Error: {toy.name} does not support profile 'gpu'; it supports quick\n"
    assert not any(tmp_path.iterdir())


def test_run_prints_the_methods_own_budget_then_works(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy(budgets={"smoke": "a blink", "quick": "about a minute"})
    res = CliRunner().invoke(main, ["run", toy.name, "--profile", "smoke"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == (f"flowbench run {toy.name} --dataset geo --profile "
                                          f"smoke: a blink per seed")
    assert res.output.splitlines()[1].startswith("making geo in data/geo-smoke")
    # a user's run goes to runs/records; the committed tree is not touched
    assert (tmp_path / "runs" / "records" / "geo" / toy.name / "smoke" / "seed0.json").is_file()
    assert not (tmp_path / "results").exists()


def test_profiles_come_from_one_place(register_toy):
    runner = CliRunner()
    visible = profiles.visible()
    assert visible == ("quick", "gpu", "long", "paper") and "smoke" in profiles.PROFILES
    for command in ("run", "ablate", "table"):
        help_text = runner.invoke(main, [command, "--help"]).output
        assert f"[{'|'.join(visible)}]" in help_text and "smoke" not in help_text
    listed = runner.invoke(main, ["list"]).output
    for name in visible:
        p = profiles.PROFILES[name]
        assert f"  {name:8s} {p.train} train / {p.val} val / {p.test} test pairs" in listed
    assert "smoke" not in listed  # the tiny test profile stays unlisted
    assert profiles.by_rank()[:4] == ("paper", "long", "gpu", "quick")  # the tables' order
    # every budget a method states is what `flowbench list` prints
    from benchmark.registry import load_methods
    for name, m in load_methods().items():
        for p, budget in m.budgets.items():
            if p in visible:
                assert f"{p}: {budget}" in listed


def test_flowbench_adds_the_commands_the_adapters_name():
    """A tool of one method (FlowCapsules' `diagnose`) comes from its adapter's `commands`."""
    from benchmark.registry import get_method, load_methods
    named = {c.name: c for m in load_methods().values() for c in m.commands}
    assert "diagnose" in named and named["diagnose"] in get_method("flowcaps").commands
    assert all(main.commands[name] is cmd for name, cmd in named.items())


def test_show_refuses_missing_source_and_list_names_methods(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["show", str(tmp_path / "none.pt"), "-o", str(tmp_path / "f.png")])
    assert res.exit_code == 1 and "does not exist" in res.output
    res = runner.invoke(main, ["list"])
    assert res.exit_code == 0 and "flowcaps" in res.output and "geo+" in res.output


def test_checkpoint_runs_take_one_seed_and_ablate_checks_every_run_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.pt").write_bytes(b"x")
    runner = CliRunner()
    res = runner.invoke(main, ["run", "flowcaps", "--checkpoint", "m.pt", "--seeds", "0,1"])
    assert res.exit_code == 1 and "--checkpoint evaluates one model" in res.output
    res = runner.invoke(main, ["ablate", "--profile", "smoke", "--data", "missing"])
    assert res.exit_code == 1 and res.output.startswith("Error: data folder missing does not")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]


def test_every_flowbench_fault_row_names_tests_that_exist(in_repo):
    """docs/faults.md's flowbench rows are kept true by tests: each one it names is here."""
    import re
    text = Path("docs/faults.md").read_text()
    section = text.split("## flowbench", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 20
    current = None  # "::name" and "same" refer to the file last named
    for row in rows[1:]:
        test_cell = row.rstrip(" |").rsplit(" | ", 1)[1]
        assert test_cell, row
        for ref in re.findall(r"`([\w./]*::\w+|[\w./]+\.py::\w+)`", test_cell):
            file, name = ref.split("::")
            current = file or current
            assert re.search(rf"^def {name}\(", Path("tests", current).read_text(), re.M), ref


def test_list_and_table_start_without_torch(in_repo):
    """The adapters import their model code (and torch) only inside their functions."""
    import os
    import subprocess
    import sys
    code = ("import sys; from click.testing import CliRunner; from benchmark.cli import main; "
            "[CliRunner().invoke(main, a) for a in (['list'], ['table'])]; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=in_repo, env={**os.environ, "PYTHONPATH": str(in_repo)})
    assert out.stdout.strip() == "False", out.stderr


def test_every_commands_help_shows_an_example_and_run_names_the_registered_methods(
        register_toy):
    import click

    from flowcaps.cli import main as flowcaps_main
    from geogen.cli import main as geogen_main
    runner = CliRunner()
    for group, prog in ((main, "flowbench"), (flowcaps_main, "flowcaps"), (geogen_main, "geogen")):
        assert isinstance(group, click.Group)
        for name in group.commands:  # every command, a new one too
            text = runner.invoke(group, [name, "--help"]).output
            example = text.split("Example", 1)[-1]
            assert "Example" in text and f"\n    {prog} {name}" in example, (prog, name)
    toy = register_toy()
    text = runner.invoke(main, ["run", "--help"]).output
    from benchmark.registry import load_methods
    assert "METHOD: " + ", ".join(load_methods()) in " ".join(text.split())
    assert toy.name in text  # read from the registry, not a list kept by hand
    show = " ".join(runner.invoke(main, ["show", "--help"]).output.split())
    assert "-o, --output PATH the figure; its extension gives the type" in show
    assert "--pairs INTEGER RANGE how many test pairs to draw" in show


def test_flowcaps_train_help_gives_its_defaults_and_lists_profiles_in_flowbenchs_order():
    """flowcaps cannot import benchmark (the layers), so this test compares the two lists."""
    import re

    from flowcaps.cli import main as flowcaps_main
    text = " ".join(CliRunner().invoke(flowcaps_main, ["train", "--help"]).output.split())
    assert "--out PATH run folder (checkpoint, log.csv, model.pt) [default: the profile's, " \
           "runs/flowcaps- PROFILE; with --config, the file's out]" in text
    assert "--device [cpu|cuda|auto] [default: auto: cuda when torch sees a GPU, else cpu]" in text
    listed = re.search(r"--profile \[([a-z|]+)\]", text).group(1).split("|")
    assert [p for p in listed if p in profiles.PROFILES and not profiles.PROFILES[p].hidden] == \
        list(profiles.visible()) == listed[:len(profiles.visible())]
    flowbench = CliRunner().invoke(main, ["run", "--help"]).output
    assert f"--profile [{'|'.join(profiles.visible())}]" in flowbench
