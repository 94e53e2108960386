"""Runs past one machine. `--executor slurm` through submitit's local executor (a real submitit
code path, no Slurm): one job per seed, the records where a local run writes them, a failed job
in the skip list. Under torchrun, global rank 0 alone scores and records."""
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
    # The jobs unpickle the toy method, whose class lives in the tests' conftest.
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
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
