"""flowbench under Ctrl-C and SIGTERM: as geogen and flowcaps answer them, one line saying what
the same command then does, exit status 130 (143), and that line is true."""
import json
import os
import signal

import pytest
import torch
from click.testing import CliRunner

from benchmark.cli import main
from benchmark.errors import BenchmarkError
from flowcaps import trainer as flowcaps_trainer
from geogen import shards

RESUMES = ("the same command resumes: the data made so far is kept, each seed's training "
           "continues from its checkpoint under runs/flowbench, seeds with a record are skipped")


def _signal_self(sig=signal.SIGINT):
    os.kill(os.getpid(), sig)  # as a terminal's Ctrl-C reaches the command


def _stopped(res, status=130, word="interrupted"):
    """The command's output ends in its one stop line; returns that line."""
    assert res.exit_code == status, res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith(f"{word}; ") and "Aborted" not in res.output
    assert "Traceback" not in res.output
    return last


def _handlers():
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


def test_ctrl_c_while_making_data_stops_between_units_and_the_command_resumes(
        tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy(budgets={"smoke": "a blink", "quick": "about a minute"})
    real, calls = shards.ShardWriter.write_chunk, {"n": 0}

    def write_chunk(self, *args):  # the Ctrl-C lands while the first shard is written
        calls["n"] += 1
        if calls["n"] == 2:
            _signal_self()
        return real(self, *args)
    before = _handlers()
    with monkeypatch.context() as m:
        m.setattr(shards.ShardWriter, "write_chunk", write_chunk)
        res = CliRunner().invoke(main, ["run", toy.name, "--profile", "smoke"])
    assert _stopped(res) == f"interrupted; {RESUMES}"
    assert _handlers() == before, "the handlers are the command's alone"
    data = tmp_path / "data" / "geo-smoke"
    assert not (data / "manifest.json").exists() and not list(data.rglob("*.tmp"))
    res = CliRunner().invoke(main, ["run", toy.name, "--profile", "smoke"])
    assert res.exit_code == 0, res.output
    assert shards.verify(data) == []
    assert (tmp_path / "runs" / "records" / "geo" / toy.name / "smoke" / "seed0.json").is_file()


def _interrupted_training(self, spec):
    """A method's training stopped by Ctrl-C, reported as the adapters report it: its own
    error, turned into a BenchmarkError, after its checkpoint was saved."""
    try:
        _signal_self()
    except KeyboardInterrupt:
        raise BenchmarkError("toy training: interrupted at step 3; resume with the same "
                             "command") from None
    raise AssertionError("the signal did not arrive")


def _failed_training(spec):
    raise BenchmarkError("toy training: bad")


def test_a_training_stop_reported_as_the_methods_error_is_still_a_stop(
        tmp_path, monkeypatch, register_toy, tiny_geo):
    monkeypatch.chdir(tmp_path)
    toy = register_toy(train=_interrupted_training)
    args = ["run", toy.name, "--profile", "smoke", "--data", str(tiny_geo)]
    assert _stopped(CliRunner().invoke(main, args)) == f"interrupted; {RESUMES}"
    # --force sets the old run aside and puts it back when stopped; the same command with
    # --force starts afresh again: it says so
    line = _stopped(CliRunner().invoke(main, args + ["--force"]))
    assert line == ("interrupted; the old run folders under runs/flowbench and their records "
                    "are back in place; the same command with --force trains every seed afresh "
                    "again; the data made so far is kept")
    # an error that no signal caused stays an error
    monkeypatch.setattr(toy, "train", _failed_training)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and res.output.endswith("\nError: toy training: bad\n")


def test_sigterm_while_evaluating_a_checkpoint_is_143_and_says_nothing_was_recorded(
        tmp_path, monkeypatch, register_toy, tiny_geo):
    monkeypatch.chdir(tmp_path)
    calls = {"n": 0}

    def predict(self, model, img0, img1, *, gt_flow=None):
        calls["n"] += 1
        _signal_self(signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the evaluation")
    toy = register_toy(predict=predict)
    ckpt = tmp_path / "toy.json"
    ckpt.write_text(json.dumps({"size": 32}))
    res = CliRunner().invoke(main, ["run", toy.name, "--profile", "smoke", "--data", str(tiny_geo),
                                    "--checkpoint", str(ckpt)])
    assert _stopped(res, 143, "terminated") == (
        "terminated; no record was written; the same command finishes the data it makes and "
        "evaluates the checkpoint again")
    assert calls["n"] == 1 and not (tmp_path / "runs" / "records").exists()


def test_ctrl_c_in_flowcaps_training_then_the_same_command_resumes_from_its_checkpoint(
        tmp_path, monkeypatch, tiny_geo):
    """The real chain: flowcaps' loop saves at the step under way, its error reaches flowbench
    as a BenchmarkError, the line says the command resumes, and it does."""
    monkeypatch.chdir(tmp_path)
    real, calls = flowcaps_trainer.FlowcapsTask.step, {"n": 0}

    def step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:  # during step 3 (0-based)
            _signal_self()
        return real(self, *args, **kwargs)
    monkeypatch.setattr(flowcaps_trainer.FlowcapsTask, "step", step)
    args = ["run", "flowcaps", "--profile", "smoke", "--data", str(tiny_geo)]
    assert _stopped(CliRunner().invoke(main, args)) == f"interrupted; {RESUMES}"
    run = tmp_path / "runs" / "flowbench" / "flowcaps_geo_smoke_seed0"
    saved = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert json.loads(saved["progress"])["step"] == 3 and not (run / "model.pt").exists()
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    model = torch.load(run / "model.pt", map_location="cpu", weights_only=True)
    # the resume trained steps 4-6 alone: 4 calls before the stop, 3 after it
    assert json.loads(model["meta"])["step"] == 6 and calls["n"] == 7


@pytest.mark.parametrize("command", [["table", "--results", "r"], ["list"]])
def test_ctrl_c_in_any_command_is_one_line_and_130(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("benchmark.readme.tables_text", lambda *a, **k: _signal_self())
    monkeypatch.setattr("benchmark.registry.load_methods", lambda: _signal_self())
    res = CliRunner().invoke(main, command)
    assert _stopped(res) == "interrupted; run the same command again"
