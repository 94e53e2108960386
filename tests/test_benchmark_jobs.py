"""The Slurm path's jobs: each submission noted beside its record's place, so the same command
after a Ctrl-C waits for a live job instead of submitting its seed twice; the seeds go out as
one job array; --dry-run prints the sbatch script; --executor submitit-local runs the jobs as
processes here. Slurm is played by stand-in sbatch/srun/sacct scripts on PATH."""
import os
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmark import submissions
from benchmark.cli import main
from benchmark.runner import RunRequest, plan

submitit = pytest.importorskip("submitit")
JOB_PATH = os.pathsep.join(str(d) for d in (Path(__file__).parent, Path(__file__).parents[1]))


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """Stand-in Slurm commands on PATH: sbatch keeps each script it is given (slurm/sbatch-N.sh)
    and answers job id 100+N; sacct reports the states in slurm/states.txt (JOBID|STATE lines)."""
    bin_dir, state = tmp_path / "slurm-bin", tmp_path / "slurm"
    bin_dir.mkdir()
    state.mkdir()
    scripts = {
        "sbatch": f'n=$(ls {state} | grep -c "^sbatch-"); n=$((n + 1))\n'
                  f'cp "$1" {state}/sbatch-$n.sh\necho "Submitted batch job $((100 + n))"\n',
        "srun": "exit 0\n",
        "sacct": f'echo "JobID|State|NodeList"\ncat {state}/states.txt 2>/dev/null\nexit 0\n',
        "scancel": "exit 0\n",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    submitit.SlurmJob.watcher.clear()  # submitit caches the states of ended jobs per class
    return state


def _ctrl_c_while_waiting(monkeypatch):
    """A Ctrl-C (a real SIGINT to this process) while the command waits on its first job."""
    def result(self):
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("the SIGINT did not stop the wait")
    monkeypatch.setattr(submitit.SlurmJob, "result", result)


def test_the_same_command_after_a_ctrl_c_waits_for_live_jobs_and_submits_the_ended_ones(
        tmp_path, monkeypatch, register_toy, fake_slurm):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    args = ["run", toy.name, "--profile", "smoke", "--seeds", "0,1,2", "--executor", "slurm",
            "--gpus", "0", "--log-folder", str(tmp_path / "logs")]
    targets = plan(RunRequest(method=toy.name, profile="smoke", seeds=(0, 1, 2))).targets
    dry = CliRunner().invoke(main, args + ["--dry-run"])
    assert dry.exit_code == 0, dry.output
    _ctrl_c_while_waiting(monkeypatch)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 130, res.output
    assert res.output.strip().splitlines()[-1] == (
        "interrupted; stopped waiting; 3 submitted job(s) go on (scancel stops them) and write "
        "their records as they end; the same command waits for those still queued or running "
        "instead of submitting them again, submits those that ended without a record and "
        "skips seeds with one")
    # One sbatch: the three seeds as one array, the very script --dry-run printed.
    assert sorted(p.name for p in fake_slurm.glob("sbatch-*")) == ["sbatch-1.sh"]
    script = (fake_slurm / "sbatch-1.sh").read_text()
    assert "#SBATCH --array=0-2%3" in script and script in dry.output
    assert [submissions.read(t).job_id for t in targets] == ["101_0", "101_1", "101_2"]

    (fake_slurm / "states.txt").write_text("101_0|RUNNING\n101_1|FAILED\n101_2|PENDING\n")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 130, res.output
    assert "seed 0: job 101_0 is still RUNNING; waiting for it (scancel 101_0 to stop it)" in (
        res.output)
    assert "seed 2: job 101_2 is still PENDING; waiting for it (scancel 101_2 to stop it)" in (
        res.output)
    # Seed 1's job failed: it alone went out again, as one job (no array of one).
    assert sorted(p.name for p in fake_slurm.glob("sbatch-*")) == ["sbatch-1.sh", "sbatch-2.sh"]
    assert "--array" not in (fake_slurm / "sbatch-2.sh").read_text()
    assert [submissions.read(t).job_id for t in targets] == ["101_0", "102", "101_2"]

    (fake_slurm / "states.txt").write_text("101_0|RUNNING\n101_2|COMPLETED\n102|PENDING\n")
    res = CliRunner().invoke(main, args + ["--force"])
    assert res.exit_code == 1 and res.output.strip() .splitlines()[-1] == (
        "Error: --force would start a second job beside a live one (seed 0: job 101_0 is still "
        "RUNNING; seed 1: job 102 is still PENDING): scancel 101_0 and scancel 102 first, or "
        "drop --force to wait for it"), res.output
    assert len(list(fake_slurm.glob("sbatch-*"))) == 2


def test_dry_run_prints_the_array_script_without_slurm_or_data(tmp_path, monkeypatch,
                                                               register_toy):
    toy = register_toy()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no sbatch, no srun
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["ablate", "--profile", "smoke", "--executor", "slurm",
                                    "--dry-run", "--partition", "gpu", "--time-limit", "30",
                                    "--make-data"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    tasks = [line for line in lines if line.startswith("array task ")]
    assert len(tasks) > 1 and f"#SBATCH --array=0-{len(tasks) - 1}%{len(tasks)}" in lines
    assert "#SBATCH --partition=gpu" in lines and "#SBATCH --time=30" in lines
    assert "#SBATCH --job-name=flowbench-flowcaps-geo-smoke" in lines
    assert lines[-1] == f"dry run: {len(tasks)} job(s) not submitted (Slurm's sbatch)"
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()
    res = CliRunner().invoke(main, ["run", toy.name, "--profile", "smoke", "--dry-run"])
    assert res.exit_code == 1 and res.output.strip() == (
        "Error: --dry-run is for --executor slurm or submitit-local (a local run submits nothing)")


def test_submitit_local_runs_the_jobs_as_processes_and_a_rerun_waits_for_a_live_one(
        tmp_path, monkeypatch, register_toy):
    """--executor submitit-local: the seeds as one array of processes here, each writing its
    record. A second command while one job still runs waits for it and submits nothing."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", JOB_PATH)
    toy = register_toy()
    args = ["run", toy.name, "--profile", "smoke", "--seeds", "0,1", "--executor",
            "submitit-local", "--gpus", "0", "--log-folder", str(tmp_path / "logs")]
    batches, real_result = [], submitit.LocalJob.result
    real = submitit.LocalExecutor._internal_process_submissions
    monkeypatch.setattr(submitit.LocalExecutor, "_internal_process_submissions",
                        lambda self, subs: batches.append(len(subs)) or real(self, subs))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert batches == [2]  # one array of two jobs
    targets = plan(RunRequest(method=toy.name, profile="smoke", seeds=(0, 1))).targets
    assert all(t.exists() and not submissions.note_path(t).exists() for t in targets)

    # A job still running, noted by a command that stopped waiting: its controller's pid.
    sleeper = submitit.local.local.start_controller(tmp_path / "logs", "sleep 30")
    try:
        targets[0].unlink()
        submissions.write(targets[0], submissions.Submission(str(sleeper.pid), tmp_path / "logs",
                                                             "local"))
        monkeypatch.setattr(submitit.LocalJob, "result", lambda self: (_ for _ in ()).throw(
            KeyboardInterrupt()))
        res = CliRunner().invoke(main, args)
    finally:
        sleeper.send_signal(signal.SIGINT)  # the controller stops its task and ends
        try:
            sleeper.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a controller still starting under load: end it
            sleeper.kill()
            sleeper.wait()
    assert (f"seed 0: job {sleeper.pid} is still RUNNING; waiting for it (kill -INT "
            f"{sleeper.pid} to stop it)") in res.output, res.output
    assert batches == [2] and "record exists, skipping seed 1" in res.output
    assert res.output.strip().splitlines()[-1].startswith(
        "Error: stopped waiting; 1 job(s) of this machine go on unless the stop reached them")
    # The controller gone, the note names an ended job: the seed goes out again.
    monkeypatch.setattr(submitit.LocalJob, "result", real_result)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert batches == [2, 1] and targets[0].exists()


def _ranks_job():
    """benchmark.executor.Job, its seed replaced by a tiny FlowCapsules training on two CPU
    ranks (torchrun, started by the job's process). Its first run notes its pid (for the test
    to signal); a requeued run notes the step of the checkpoint it resumes from."""
    import flowcaps
    from benchmark.executor import Job
    from flowcaps.launch import _saved_step

    class RanksJob(Job):
        def _run(self):
            cfg, data = self.plan
            out = Path(cfg.loop.out)
            pid = out.parent / "job.pid"
            out.parent.mkdir(parents=True, exist_ok=True)
            if not pid.exists():
                pid.write_text(str(os.getpid()))
            else:
                (out.parent / "resumed_from").write_text(str(_saved_step(out / "checkpoint.pt")))
            return [str(flowcaps.train(cfg, data, progress=False))]

    return RanksJob


@pytest.mark.parametrize("sig", [signal.SIGUSR2, signal.SIGTERM])
def test_a_signal_to_a_jobs_process_stops_its_ranks_at_a_step_end_and_the_requeue_resumes(
        tiny_geo, tmp_path, monkeypatch, sig):
    """USR2 (preemption, a time limit near) or a bare SIGTERM (scancel's) reaches the job's
    process, the torchrun launcher's parent: the ranks end their step, save and exit; on USR2
    submitit requeues the job, on SIGTERM the job ends; the requeued (or submitted again) job
    resumes, and its weights are an unbroken run's."""
    import time

    import torch

    import flowcaps
    from benchmark.executor import SlurmOptions, _executor
    from flowcaps import checkpoint
    from test_flowcaps_train import tiny_config
    monkeypatch.setenv("PYTHONPATH", JOB_PATH)
    # No periodic checkpoint: only the stop's save lets the requeued job resume.
    cfg = tiny_config(tmp_path / "job" / "run", epochs=8, cpu_ranks=2, checkpoint_minutes=600.0)
    opts = SlurmOptions(gpus_per_job=0, time_minutes=5, log_folder=tmp_path / "logs",
                        cluster="local")
    job = _executor(opts, submitit, "ranks").submit(_ranks_job()((cfg, tiny_geo)))
    log, pid = Path(cfg.loop.out) / "log.csv", tmp_path / "job" / "job.pid"
    deadline = time.monotonic() + 120
    while not (log.exists() and len(log.read_text().splitlines()) > 2):  # header + 2 steps
        assert time.monotonic() < deadline and job.state == "RUNNING", job.stderr()
        time.sleep(0.05)
    os.kill(int(pid.read_text()), sig)
    requeued = lambda: "Requeued job" in "".join(  # noqa: E731
        p.read_text() for p in (tmp_path / "logs").glob("*_log.*"))
    if sig == signal.SIGUSR2:
        [model] = job.result()
        assert requeued()
    else:  # scancel's SIGTERM: saved and ended, never requeued; the same job again resumes
        with pytest.raises(Exception):
            job.result()
        assert not requeued() and (Path(cfg.loop.out) / "checkpoint.pt").exists()
        job = _executor(opts, submitit, "ranks").submit(_ranks_job()((cfg, tiny_geo)))
        [model] = job.result()
    resumed = int((tmp_path / "job" / "resumed_from").read_text())
    steps = 48 // 8 * 8  # 48 pairs, a global batch of 8, 8 epochs
    assert 2 <= resumed < steps, resumed
    plain = flowcaps.train(cfg.replace(out=str(tmp_path / "plain")), tiny_geo, progress=False)
    a, b = checkpoint.read(Path(model))["model"], checkpoint.read(plain)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert checkpoint.meta_of(checkpoint.read(Path(model)))["step"] == steps
