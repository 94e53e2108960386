"""Runs past one machine. `--executor slurm` through submitit's local executor (a real submitit
code path, no Slurm): one job per seed, the records where a local run writes them, a failed job
in the skip list. Under torchrun, global rank 0 alone scores and records."""
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmark import records
from benchmark.cli import main
from benchmark.errors import BenchmarkError
from benchmark.runner import RunRequest, execute, plan

try:
    import submitit
except ImportError:  # the test extra installs it; without it the executor tests are skipped
    submitit = None
needs_submitit = pytest.mark.skipif(submitit is None, reason="submitit is not installed")
# A job's Python path: the tests (the jobs unpickle toy methods whose classes live there) and
# this checkout (not the one the environment installed).
JOB_PATH = os.pathsep.join(str(d) for d in (Path(__file__).parent, Path(__file__).parents[1]))


def _train_or_fail(self, spec):
    """The toy's training, except for seed 2's run, which fails as a job would."""
    if spec.run_dir.name.endswith("seed2"):
        raise RuntimeError("CUDA out of memory (seed 2)")
    return type(self).__mro__[1].train(self, spec)


@needs_submitit
def test_jobs_of_the_local_executor_write_the_records_and_name_a_failure(
        tmp_path, monkeypatch, register_toy):
    from benchmark.executor import SlurmOptions, submit_all
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", JOB_PATH)
    toy = register_toy(train=_train_or_fail)
    p = plan(RunRequest(method=toy.name, profile="smoke", seeds=(0, 1, 2)))
    lines = []
    opts = SlurmOptions(gpus_per_job=0, time_minutes=5, log_folder=tmp_path / "logs",
                        cluster="local")
    with pytest.raises(BenchmarkError, match="1 of 3 jobs failed"):
        submit_all([p], opts, echo=lines.append)
    assert sum(line.startswith("submitted job ") for line in lines) == 3
    done = [records.read_record(t) for t in p.targets[:2]]  # where `flowbench run` writes them
    assert [r["seed"] for r in done] == [0, 1] and not p.targets[2].exists()
    _, skipped = records.load_records([Path("runs/records")])
    assert len(skipped) == 1
    assert skipped[0].startswith(f"{p.targets[2]}: job ") and skipped[0].endswith(
        "failed: RuntimeError: CUDA out of memory (seed 2)")
    # Run again (here, locally), seed 2's record replaces the note.
    monkeypatch.setattr(type(toy), "train", type(toy).__mro__[1].train)
    execute(plan(RunRequest(method=toy.name, profile="smoke", seeds=(0, 1, 2))), echo=lines.append)
    assert p.targets[2].exists() and not records.failure_path(p.targets[2]).exists()
    assert "record exists, skipping seed 0" in " ".join(lines)
    assert records.load_records([Path("runs/records")])[1] == []


def test_the_executor_options_are_checked_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["run", "flowcaps", "--profile", "smoke", "--partition", "gpu"])
    assert res.exit_code == 1 and res.output.strip() == (
        "Error: --partition, --gpus, --cpus, --time-limit and --log-folder are for --executor "
        "slurm")
    res = CliRunner().invoke(main, ["ablate", "--profile", "smoke", "--executor", "slurm",
                                    "--jobs", "2"])
    assert res.exit_code == 1 and "--jobs is for --executor local" in res.output


def test_without_submitit_the_slurm_executor_says_what_to_install(tmp_path, monkeypatch):
    import builtins
    from benchmark.executor import SlurmOptions, submit_all
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (
        (_ for _ in ()).throw(ImportError(name)) if name == "submitit" else real(name, *a, **k)))
    with pytest.raises(BenchmarkError) as err:
        submit_all([], SlurmOptions())
    assert str(err.value) == "--executor slurm needs submitit: pip install '.[cluster]'"


@needs_submitit
def test_a_job_the_scheduler_ended_is_named_with_its_state():
    from benchmark.executor import _reason
    err = submitit.core.utils.UncompletedJobError(
        "Job 7 (task: 0) with path /x/7_result.pkl\nhas not produced any output (state: TIMEOUT)"
        "\nError stream produced:\n" + "-" * 40 + "\nslurmstepd: CANCELLED DUE TO TIME LIMIT")
    assert _reason(err) == ("Job 7 (task: 0) with path /x/7_result.pkl has not produced any "
                            "output (state: TIMEOUT)")


def test_under_torchrun_only_rank_0_scores_and_records(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    req = RunRequest(method=toy.name, profile="smoke", seeds=(0, 1))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    lines = []
    assert execute(plan(req), echo=lines.append) == [] and lines == []
    assert sorted(p.name for p in Path("runs/flowbench").iterdir()) == [
        f"{toy.name}_geo_smoke_seed0", f"{toy.name}_geo_smoke_seed1"]  # it trained
    assert not Path("runs/records").exists()
    monkeypatch.setenv("RANK", "0")
    assert [p.name for p in execute(plan(req), echo=lines.append)] == ["seed0.json", "seed1.json"]
    with pytest.raises(BenchmarkError, match="under torchrun a run trains"):
        execute(plan(RunRequest(method=toy.name, profile="smoke", force=True)))


@needs_submitit
def test_slurm_without_sbatch_is_one_line_before_any_data_is_made(tmp_path, monkeypatch,
                                                                   register_toy):
    toy = register_toy()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # submitit installed, Slurm not
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["run", toy.name, "--profile", "smoke", "--executor", "slurm",
                                    "--make-data", "--data", str(tmp_path / "data")])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    last = res.output.strip().splitlines()[-1]  # after the plan's line, one error line
    assert last.startswith("Error: --executor slurm: no sbatch on this machine's PATH")
    assert not (tmp_path / "data").exists()


def _preempted_toy():
    """The toy of tests/toy_method.py (trained through trainloop) whose task notes each step
    it trains in the run folder's steps.txt and, the first time it reaches step 5, sends its
    process submitit's preemption signal in the middle of the step (once: a file beside the run
    folders remembers it). No periodic checkpoint: the run saves only when asked to."""
    import dataclasses
    import os
    import signal

    from toy_method import ToyLoopMethod, ToyTask

    class PreemptedTask(ToyTask):
        def step(self, loss_fn, rows, gen, ctx):
            out = Path(self.config.out)
            with open(out / "steps.txt", "a") as f:
                f.write(f"{ctx.step}\n")
            losses = super().step(loss_fn, rows, gen, ctx)
            if ctx.step == 5 and not (out.parent / "preempted").exists():
                (out.parent / "preempted").touch()
                os.kill(os.getpid(), signal.SIGUSR2)  # the scheduler's, mid-step
            return losses

    class PreemptedToy(ToyLoopMethod):
        name, task = "toypreempt", PreemptedTask

        def _config(self, spec):
            return dataclasses.replace(super()._config(spec), checkpoint_minutes=60.0)

    return PreemptedToy


@needs_submitit
def test_a_preempted_job_saves_at_the_step_end_and_its_requeue_ends_as_an_unbroken_run(
        tmp_path, monkeypatch):
    import json

    import torch

    from benchmark.executor import SlurmOptions, submit_all
    from benchmark.registry import register, unregister
    from toy_method import FORMAT, ToyError
    from trainloop.checkpoint import read_blob
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", JOB_PATH)
    toy = register(_preempted_toy())
    try:
        job_req = RunRequest(method=toy.name, profile="smoke", runs=Path("job-runs"),
                             results=Path("job-records"))
        opts = SlurmOptions(gpus_per_job=0, time_minutes=5, log_folder=tmp_path / "logs",
                            cluster="local")
        [job_record] = submit_all([plan(job_req)], opts, echo=lambda line: None)
        plain_runs = Path("plain-runs")
        plain_runs.mkdir()
        (plain_runs / "preempted").touch()  # the same run, never interrupted, in this process
        [plain_record] = execute(plan(RunRequest(method=toy.name, profile="smoke",
                                                 runs=plain_runs, results=Path("plain-records"))),
                                 echo=lambda line: None)
        job, plain = (records.read_record(p) for p in (job_record, plain_record))
    finally:
        unregister(toy.name)
    assert (Path("job-runs") / "preempted").exists()
    log = "".join(p.read_text() for p in (tmp_path / "logs").glob("*_log.out"))
    assert "Caught signal SIGUSR2" in log and "Requeued job" in log, log
    job_dir, plain_dir = (next(p for p in Path(r).iterdir() if p.is_dir())
                          for r in ("job-runs", "plain-runs"))
    # Every step trained once: step 5 ended, was saved, and the requeued job went on from 6.
    steps = list(range(20))
    assert [int(s) for s in (job_dir / "steps.txt").read_text().split()] == steps
    assert [int(s) for s in (plain_dir / "steps.txt").read_text().split()] == steps
    assert json.dumps(job["metrics"], sort_keys=True) == json.dumps(plain["metrics"],
                                                                    sort_keys=True)
    for name in ("model.pt", "checkpoint.pt"):
        a, b = (read_blob(d / name, FORMAT, "a toy", ToyError) for d in (job_dir, plain_dir))
        assert a["model"].keys() == b["model"].keys()
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    a, b = (read_blob(d / "checkpoint.pt", FORMAT, "a toy", ToyError)["optimizer"]["state"]
            for d in (job_dir, plain_dir))
    assert a and a.keys() == b.keys()
    assert all(torch.equal(a[i][k], b[i][k]) for i in a for k in a[i])


def test_a_method_that_trains_on_one_gpu_refuses_a_job_of_several(tmp_path, monkeypatch,
                                                                   register_toy):
    """Before: the job was submitted and trained on one GPU, the others idle."""
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    res = CliRunner().invoke(main, ["run", toy.name, "--profile", "smoke", "--executor", "slurm",
                                    "--gpus", "4"])
    assert res.exit_code == 1 and res.output.strip() == (
        f"Error: {toy.name} trains on one GPU: --gpus 4 would leave 3 idle; pass --gpus 1 (only "
        f"methods that train one rank per GPU, such as flowcaps, take more)")
    assert list(tmp_path.iterdir()) == []  # no data made, nothing submitted
    # FlowCapsules trains one rank per GPU: its job of 4 GPUs goes on to the submission.
    res = CliRunner().invoke(main, ["run", "flowcaps", "--profile", "smoke", "--executor",
                                    "slurm", "--gpus", "4"])
    assert "trains on one GPU" not in res.output and "--executor slurm" in res.output
