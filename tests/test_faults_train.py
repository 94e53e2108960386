"""Faults of training runs (issue 52): a run folder of other data, a full disk during a
checkpoint save, a failure inside torchrun's ranks, a budget too small to train, a device this
machine lacks. Each ends in one line and a non-zero exit, or in a correct run."""
import errno
import json

import pytest
import torch
from click.testing import CliRunner

import trainloop
from flowcaps import FlowCapsules, TrainConfig, checkpoint, launch
from flowcaps.cli import main

from test_flowcaps_train import tiny_config


@pytest.fixture(scope="module")
def other_geo(tmp_path_factory):
    """A second tiny Geo set (another seed): other data of the same kind as tiny_geo."""
    from geogen.make import MakeConfig, make_dataset
    out = tmp_path_factory.mktemp("other") / "geo"
    return make_dataset(MakeConfig(variant="geo", n=16, val=2, test=4, size=32, seed=1,
                                   out=str(out), workers=1, shard_size=1000), progress=False)


@pytest.fixture
def launched(monkeypatch):
    """flowcaps.launch.launch replaced by a recorder: the checks before the ranks, alone."""
    calls = []

    def launch_(cfg, data, ranks, progress, rendezvous=None):
        calls.append(data)
        torch.manual_seed(0)
        return checkpoint.save(f"{cfg.loop.out}/model.pt", cfg, FlowCapsules(cfg.model),
                               meta={"step": 6, "pairs": 48, "train_seconds": 3.0,
                                     "stop_reason": "epochs"})
    monkeypatch.setattr(launch, "launch", launch_)
    return calls


def _one_line(res, code=1):
    assert res.exit_code == code, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output, res.output
    return res.output


def test_a_run_folder_of_other_data_is_refused_unless_forced(tiny_geo, other_geo, tmp_path,
                                                             launched):
    cfg = tiny_config(tmp_path / "run", cpu_ranks=2)
    spec = tmp_path / "two.json"
    spec.write_text(cfg.to_json())
    saved = launch.per_rank_config(cfg, 2)
    torch.manual_seed(0)
    checkpoint.save(tmp_path / "run" / "checkpoint.pt", saved, FlowCapsules(saved.model),
                    progress={"step": 3, "train_seconds": 1.0, "pairs": 24},
                    meta=trainloop.data_meta(tiny_geo))
    res = CliRunner().invoke(main, ["train", str(other_geo), "--config", str(spec)])
    out = _one_line(res)
    assert f"trained on other data: {tiny_geo} (manifest" in out and f"not {other_geo}" in out
    assert "--force" in out and not launched
    # the same data resumes; --force removes the run's files and trains afresh
    assert CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec)]).exit_code == 0
    (tmp_path / "run" / "mine.txt").write_text("kept")
    res = CliRunner().invoke(main, ["train", str(other_geo), "--config", str(spec), "--force"])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    assert (tmp_path / "run" / "mine.txt").read_text() == "kept"
    assert launched == [str(tiny_geo), str(other_geo)]


def test_a_full_disk_during_a_checkpoint_save_keeps_the_last_good_one(tiny_geo, tmp_path,
                                                                      monkeypatch):
    """The third save finds the disk full after writing part of its file: one line, the save
    before it intact on disk, no .tmp left."""
    real, calls = torch.save, {"n": 0}

    def save(obj, f, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            with open(f, "wb") as fh:
                fh.write(b"\0" * 4096)  # what fitted before the disk filled up
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, f, *args, **kwargs)
    monkeypatch.setattr(torch, "save", save)
    spec = tmp_path / "one.json"
    spec.write_text(tiny_config(tmp_path / "run", cpu_ranks=1, epochs=3).to_json())
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec), "--quiet"])
    out = _one_line(res)
    run = tmp_path / "run"
    assert "No space left on device" in out and f"last good checkpoint kept at {run}" in out
    assert sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp")) == []
    kept = checkpoint.read(run / "checkpoint.pt")  # whole: it loads
    assert json.loads(kept["progress"])["step"] == 2 and not (run / "model.pt").exists()


@pytest.mark.parametrize("out, message", [
    ("/proc/run", "--out /proc/run cannot be written"),
    ("{tmp}/file/run", "lies under"),
])
def test_flowcaps_train_checks_out_before_the_ranks_start(tiny_geo, tmp_path, launched, out,
                                                          message):
    (tmp_path / "file").write_text("")
    spec = tmp_path / "two.json"
    spec.write_text(tiny_config(tmp_path / "run", cpu_ranks=2).to_json())
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec),
                                    "--out", out.format(tmp=tmp_path)])
    assert message in _one_line(res) and not launched


def test_flowcaps_train_on_a_read_only_mount(tiny_geo, tmp_path, launched, monkeypatch):
    from geogen import outpath

    def refuse(path):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(outpath, "_create", refuse)
    spec = tmp_path / "two.json"
    spec.write_text(tiny_config(tmp_path / "run", cpu_ranks=2).to_json())
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec)])
    assert "cannot be written: Read-only file system" in _one_line(res) and not launched


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_cuda_on_a_cpu_only_machine_is_refused(tiny_geo, tmp_path, monkeypatch, no_cuda,
                                               launched):
    from benchmark.cli import main as flowbench
    spec = tmp_path / "two.json"
    spec.write_text(tiny_config(tmp_path / "run", cpu_ranks=2).to_json())
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec),
                                    "--device", "cuda"])
    assert "no CUDA device is available" in _one_line(res) and not launched
    monkeypatch.chdir(tmp_path)
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"")
    for args in (["--checkpoint", str(ckpt)], []):
        res = CliRunner().invoke(flowbench, ["run", "flowcaps", "--device", "cuda", *args])
        assert "--device cuda: this machine has no CUDA device" in _one_line(res)
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


def test_a_gpu_profile_on_a_cpu_only_machine_is_refused_before_its_data(tmp_path, monkeypatch,
                                                                       no_cuda):
    from benchmark import runner
    from benchmark.cli import main as flowbench
    monkeypatch.chdir(tmp_path)
    for profile in ("gpu", "paper"):
        res = CliRunner().invoke(flowbench, ["run", "flowcaps", "--profile", profile])
        out = _one_line(res)
        assert f"the {profile} profile trains on a GPU and this machine has none" in out
        assert "--device cpu" in out and "quick, long" in out
    assert not any(tmp_path.iterdir())  # no data made
    # asked for by name (--device cpu), it is planned: its data is made when it runs
    p = runner.plan(runner.RunRequest(method="flowcaps", profile="gpu", device="cpu"))
    assert p.train_data is not None and not p.train_data.root.exists()


def _corrupt_last_chunk(root):
    """Zero bytes inside the last compressed chunk of the train frames: the shard's headers
    read, its last rows (rank 1's part of two) do not."""
    import h5py
    shard = next((root / "train").glob("shard-*.h5"))
    with h5py.File(shard) as f:
        frames = f["frames"].id
        info = frames.get_chunk_info(frames.get_num_chunks() - 1)
    data = bytearray(shard.read_bytes())
    data[info.byte_offset + 50:info.byte_offset + 300] = bytes(250)
    shard.write_bytes(bytes(data))


@pytest.mark.parametrize("fault", ["nan", "corrupt frames"])
def test_a_failure_inside_the_ranks_is_one_line_once(tiny_geo, tmp_path, fault):
    """A loss gone NaN (every rank at one step) or training frames that do not decode (one
    rank's part; the other waits for it): one line, once, no torchrun traceback, no rank left."""
    import shutil
    import subprocess
    import sys
    data = tiny_geo
    if fault == "corrupt frames":
        data = tmp_path / "bad"
        shutil.copytree(tiny_geo, data)
        _corrupt_last_chunk(data)
    # Adam's steps are about lr long: at 1e30 the weights overflow at the first step.
    lr = 1e30 if fault == "nan" else 1e-3
    spec = tmp_path / "two.json"
    spec.write_text(tiny_config(tmp_path / "run", cpu_ranks=2, epochs=2, lr=lr).to_json())
    res = subprocess.run([sys.executable, "-m", "flowcaps.cli", "train", str(data), "--config",
                          str(spec), "--quiet"], capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert len(out.strip().splitlines()) == 1 and out.startswith("Error: "), out
    expected = ("loss not finite at step 1; stopped, last good checkpoint kept at"
                if fault == "nan" else f"cannot read train split of {data}")
    assert expected in out
    assert not (tmp_path / "run" / launch.RANK_ERROR).exists()


def test_run_force_replaces_model_and_record_together(tiny_geo, tmp_path, monkeypatch,
                                                      register_toy):
    """`flowbench run --force` stopped during evaluation (or killed outright) leaves the old
    model and record as they were; finished, both are the new ones."""
    from dataclasses import replace

    from benchmark import runner, setaside
    from benchmark.records import file_sha256, read_record
    toy = register_toy()
    req = runner.RunRequest(method=toy.name, profile="smoke", data=tiny_geo, device="cpu",
                            results=tmp_path / "results", runs=tmp_path / "runs")
    [record] = runner.run(req, progress=False, echo=lambda line: None)
    run_dir = tmp_path / "runs" / f"{toy.name}_geo_smoke_seed0"
    model = run_dir / "model.json"
    old = (record.read_bytes(), model.read_bytes())

    def stopped(*args, **kwargs):
        model.write_text("a new model, never scored")  # the new training had finished
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(runner, "evaluate", stopped)
        with pytest.raises(KeyboardInterrupt):
            runner.run(replace(req, force=True), progress=False, echo=lambda line: None)
    assert (record.read_bytes(), model.read_bytes()) == old
    leftovers = [p for p in tmp_path.rglob(f"*{setaside.SUFFIX}")]
    assert leftovers == []
    # killed outright while the new model trained: the next run puts the old pair back
    setaside.put_aside(run_dir, record)
    run_dir.mkdir()
    (run_dir / "model.json").write_text("half trained")
    lines = []
    assert runner.run(req, progress=False, echo=lines.append) == [record]
    assert "the old ones are back" in lines[0] and "record exists, skipping" in lines[1]
    assert (record.read_bytes(), model.read_bytes()) == old
    # finished, the new pair replaces the old one, and the record names its model's bytes
    monkeypatch.setattr(toy, "train", _toy_train)
    runner.run(replace(req, force=True), progress=False, echo=lambda line: None)
    assert json.loads(model.read_text())["retrained"] and record.read_bytes() != old[0]
    assert read_record(record)["checkpoint_sha256"] == file_sha256(model)
    assert [p for p in tmp_path.rglob(f"*{setaside.SUFFIX}")] == []


def _toy_train(spec):
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    path = spec.run_dir / "model.json"
    path.write_text('{"size": 32, "retrained": true}')
    return path


def test_a_run_past_its_time_guard_stops_and_the_last_line_counts_steps(
        tiny_geo, tmp_path, monkeypatch):
    """A run whose guard runs out: one line saying so (checkpoint kept), not a model; a run
    that trains ends in a line counting its steps."""
    from trainloop import loop
    clock = {"t": 0.0}

    def monotonic():  # each reading 20 s later: the first step takes longer than 0.3 min
        clock["t"] += 20.0
        return clock["t"]
    spec = tmp_path / "one.json"
    spec.write_text(tiny_config(tmp_path / "run", cpu_ranks=1, epochs=3, max_minutes=0.3,
                                compile=True).to_json())
    # compiles (the flag) without compiling: the clock stands in for the minute it takes
    monkeypatch.setattr("flowcaps.trainer.FlowcapsTask.loss_module",
                        lambda self, model, world: _uncompiled_loss(self, model))
    with monkeypatch.context() as m:
        m.setattr(loop.time, "monotonic", monotonic)
        res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec), "--quiet"])
    out = _one_line(res)
    assert "stopped by the time guard (0.3 min of training) at step 1 of 18" in out
    assert "not a finished run" in out
    assert f"checkpoint kept at {tmp_path / 'run' / 'checkpoint.pt'}" in out
    assert not (tmp_path / "run" / "model.pt").exists()
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec), "--quiet",
                                    "--out", str(tmp_path / "free"), "--max-minutes", "60",
                                    "--set", "compile=false"])
    assert res.exit_code == 0, res.output
    last = res.output.strip().splitlines()[-1]  # 3 epochs of 48 pairs, 8 a step
    assert last.startswith(f"model written to {tmp_path / 'free' / 'model.pt'}: 18 steps (144 "
                           f"pairs) in ") and last.endswith("stopped by its epoch count")


def _uncompiled_loss(task, model):
    from flowcaps.trainer import _LossModule
    return _LossModule(model, task.config)
