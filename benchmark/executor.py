"""Runs on a cluster: one Slurm job per (method, dataset, profile, variant, seed), through
submitit (the optional extra `pip install '.[cluster]'`); no scheduler of our own.

The data every job reads is made (or checked) here first, as `--jobs` does, so no two jobs
make one folder. Each job runs `runner.execute` on its one seed and writes its record into the
same record tree as a local run (a shared file system). A job that fails (an error, a time
limit, a node lost) leaves a note beside its record's place (`records.write_failure`): the
tables' skip list names it, and the record, once a later run writes it, replaces it.
"""
from __future__ import annotations

import shutil
import signal
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from benchmark import records
from benchmark.errors import BenchmarkError
from benchmark.runner import Plan, execute, prepare_data

EXECUTORS = ("local", "slurm")


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None  # None: the cluster's default partition
    gpus_per_job: int = 1
    time_minutes: int = 60  # each job's limit; Slurm ends a job past it
    cpus_per_job: int = 8
    log_folder: Path = Path("runs") / "slurm"  # submitit's pickles and each job's stdout/stderr
    cluster: str = "slurm"  # submitit's AutoExecutor cluster; "local" runs the jobs here (tests)

    def validate(self) -> None:
        if self.gpus_per_job < 0 or self.time_minutes < 1 or self.cpus_per_job < 1:
            raise BenchmarkError("--gpus must be >= 0, --time-limit and --cpus >= 1")


def _submitit():
    try:
        import submitit
    except ImportError:
        raise BenchmarkError("--executor slurm needs submitit: pip install '.[cluster]'") from None
    return submitit


def one_per_seed(plans: list[Plan]) -> list[Plan]:
    """Each plan split into one plan per seed: a job each."""
    return [replace(p, req=replace(p.req, seeds=(seed,)), targets=(target,))
            for p in plans for seed, target in zip(p.req.seeds, p.targets)]


def job_name(p: Plan) -> str:
    r = p.req
    return "-".join(["flowbench", r.method, r.dataset, r.profile]
                    + ([r.variant.tag()] if r.variant.tag() else []) + [f"seed{r.seeds[0]}"])


class Job:
    """What a job runs: the plan's one seed, its record written (paths as text).

    Checkpointable as submitit means it (a `checkpoint` method): on the scheduler's USR2 (a
    time limit near, or preemption) submitit calls `checkpoint` and requeues the job with what
    it returns, this same job, whose seed then resumes its training from its run folder. Before
    that, a training in progress finishes its step and saves its checkpoint (the loop's stop
    flag, read at each step's end), so the requeued job loses no step; only then does
    submitit's own handler checkpoint, requeue and exit. SIGTERM stays submitit's: ignored, as
    on preemption it comes with USR2.
    """

    def __init__(self, plan: Plan):
        self.plan = plan

    def __call__(self) -> list[str]:
        from trainloop import ddp
        from trainloop.allocator import keep_freed_memory
        keep_freed_memory()  # as `flowbench run` sets it
        sig = _submitit().JobEnvironment._usr_sig()  # USR2, or SUBMITIT_PREEMPT_SIGNAL's
        submitits = signal.getsignal(sig)
        if not callable(submitits) or threading.current_thread() is not threading.main_thread():
            return self._run()  # called outside a job: no submitit handler to defer
        caught: list[int] = []

        def at_step_end(signum: int, frame) -> None:
            if caught:  # the stop is under way
                return
            if ddp.request_stop():  # the loop saves at this step's end and stops
                caught.append(signum)
            else:  # no step to finish (data, evaluation): requeue now, as submitit does
                submitits(signum, frame)

        signal.signal(sig, at_step_end)
        try:
            return self._run()
        except BaseException:
            if caught:  # the checkpoint is saved: checkpoint(), requeue and exit
                submitits(caught[0], None)
            raise
        finally:
            signal.signal(sig, submitits)
            ddp.clear_stop()

    def _run(self) -> list[str]:
        return [str(path) for path in execute(self.plan, progress=False)]

    def checkpoint(self):
        """What submitit requeues: the same plan (a submitit.helpers.DelayedSubmission)."""
        return _submitit().helpers.DelayedSubmission(Job(self.plan))


def submit_all(plans: list[Plan], opts: SlurmOptions, echo=print) -> list[Path]:
    """Submit one job per seed of every plan, wait for them all; the records written. A job
    that failed is reported, and noted beside its record's place, after all have ended."""
    opts.validate()
    submitit = _submitit()
    if opts.cluster == "slurm" and shutil.which("sbatch") is None:  # before the data step
        raise BenchmarkError("--executor slurm: no sbatch on this machine's PATH (submitit is "
                             "installed, Slurm is not): run it where Slurm is, or --executor local")
    executor = submitit.AutoExecutor(folder=str(opts.log_folder), cluster=opts.cluster)
    jobs_plans = [p for p in one_per_seed(plans) if _to_submit(p, echo)]
    prepare_data(jobs_plans, echo)
    executor.update_parameters(timeout_min=opts.time_minutes, gpus_per_node=opts.gpus_per_job,
                               cpus_per_task=opts.cpus_per_job, tasks_per_node=1, nodes=1,
                               slurm_partition=opts.partition)
    jobs = []
    for p in jobs_plans:
        executor.update_parameters(name=job_name(p))
        job = executor.submit(Job(p))
        echo(f"submitted job {job.job_id}: {job_name(p)} (log {opts.log_folder})")
        jobs.append((job, p))
    written, failed = [], 0
    for done, (job, p) in enumerate(jobs):
        try:
            written += [Path(s) for s in job.result()]
            echo(f"job {job.job_id} done: {p.targets[0]}")
        except KeyboardInterrupt:
            raise BenchmarkError(f"stopped waiting; {len(jobs) - done} submitted job(s) go on "
                                 f"(scancel stops them) and write their records as they end, "
                                 f"but a failure among them is noted only in {opts.log_folder}"
                                 ) from None
        except Exception as err:  # submitit's errors carry the job's own traceback as text
            failed += 1
            reason = _reason(err)
            records.write_failure(p.targets[0], reason, str(job.job_id))
            echo(f"job {job.job_id} failed ({job_name(p)}): {reason}")
    if failed:
        raise BenchmarkError(f"{failed} of {len(jobs)} jobs failed; `flowbench table` lists "
                             f"them as skipped; their logs are in {opts.log_folder}")
    return written


def _to_submit(p: Plan, echo) -> bool:
    """A seed whose record is there is not submitted again (unless --force), as a local run
    skips it."""
    if p.targets[0].exists() and not p.req.force:
        echo(f"record exists, skipping seed {p.req.seeds[0]}: {p.targets[0]} (--force redoes it)")
        return False
    return True


def _reason(err: Exception) -> str:
    """One line for a failed job: the last line of its traceback (submitit's FailedJobError
    puts it between two dashed lines), else the first two lines of the scheduler's reason
    (UncompletedJobError: "... has not produced any output (state: TIMEOUT)")."""
    text = str(err)
    body = (text.split("-" * 22)[1] if text.count("-" * 22) >= 2
            else " ".join(text.split("\n")[:2]))
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    return (lines[-1] if lines else type(err).__name__)[:300]
