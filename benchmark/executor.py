"""Runs on a cluster: one Slurm job per (method, dataset, profile, variant, seed), through
submitit (the optional extra `pip install '.[cluster]'`); no scheduler of our own.

The data every job reads is made (or checked) here first, as `--jobs` does, so no two jobs
make one folder. Each job runs `runner.execute` on its one seed and writes its record into the
same record tree as a local run (a shared file system). A job that fails (an error, a time
limit, a node lost) leaves a note beside its record's place (`records.write_failure`): the
tables' skip list names it, and the record, once a later run writes it, replaces it.
"""
from __future__ import annotations

import shlex
import shutil
import signal
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from benchmark import records, submissions
from benchmark.errors import BenchmarkError, StopLine
from benchmark.runner import Plan, execute, prepare_data


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None  # None: the cluster's default partition
    gpus_per_job: int = 1
    time_minutes: int = 60  # each job's limit; Slurm ends a job past it
    cpus_per_job: int = 8
    log_folder: Path = Path("runs") / "slurm"  # submitit's pickles and each job's stdout/stderr
    cluster: str = "slurm"  # "local": submitit's LocalExecutor, the jobs as processes here

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
    submitit's own handler checkpoint, requeue and exit. A training on several ranks (torchrun,
    started by this process) is reached the same way: the launcher hands each rank the stop
    (trainloop.ddp.request_stop), the ranks save at their step's end and exit, and then the job
    requeues. A bare SIGTERM (scancel's; submitit would log and ignore it) stops the training the
    same way, saved at the step's end, but ends the job without a requeue: the same command
    resumes it from its run folder.
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
            if caught:  # the stop is under way; a USR2 after a SIGTERM still asks the requeue
                caught.append(signum)
                return
            if ddp.request_stop():  # the loop (or the ranks) saves at this step's end, stops
                caught.append(signum)
            elif signum == sig:  # no step to finish (data, evaluation): requeue now, as submitit
                submitits(signum, frame)
            else:  # a bare SIGTERM outside training: end the job, as the signal asks
                raise SystemExit(128 + signum)

        previous = {s: signal.signal(s, at_step_end) for s in (sig, signal.SIGTERM)}
        try:
            return self._run()
        except BaseException:
            if sig in caught:  # the checkpoint is saved: checkpoint(), requeue and exit
                submitits(sig, None)
            raise  # a bare SIGTERM (scancel's): saved, and the job ends without a requeue
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            ddp.clear_stop()

    def _run(self) -> list[str]:
        return [str(path) for path in execute(self.plan, progress=False)]

    def checkpoint(self):
        """What submitit requeues: the same plan (a submitit.helpers.DelayedSubmission)."""
        return _submitit().helpers.DelayedSubmission(type(self)(self.plan))


def submit_all(plans: list[Plan], opts: SlurmOptions, echo=print,
               dry_run: bool = False) -> list[Path]:
    """Submit one job per seed of every plan, as one job array, and wait for them all; the
    records written. A seed whose record exists is skipped, and one whose noted job is still
    queued or running is waited for, not submitted again. A job that failed is reported, and
    noted beside its record's place, after all have ended. `dry_run`: print the sbatch script
    and the jobs instead, submitting nothing and making no data."""
    opts.validate()
    todo = [p for p in one_per_seed(plans) if _to_submit(p, echo)]
    if dry_run:
        return print_dry_run(todo, opts, echo)
    submitit = _submitit()
    if opts.cluster == "slurm" and shutil.which("sbatch") is None:  # before the data step
        raise BenchmarkError("--executor slurm: no sbatch on this machine's PATH (submitit is "
                             "installed, Slurm is not): run it where Slurm is, or --executor local")
    live, fresh = _live_and_fresh(todo, submitit, echo)
    prepare_data(fresh, echo)
    return _wait(live + _submit_array(fresh, opts, submitit, echo), opts, echo)


def _live_and_fresh(todo: list[Plan], submitit, echo) -> tuple[list, list[Plan]]:
    """The seeds whose noted job is alive, with that job, and the seeds to submit. --force
    refuses where a job is alive: a second job on the same run folder would train it twice
    at once."""
    live, fresh = [], []
    for p in todo:
        note = submissions.read(p.targets[0])
        job = submissions.job_of(note, submitit) if note is not None else None
        if job is not None and submissions.alive(job):
            live.append((job, p, note))
        else:
            fresh.append(p)  # no note, or its job ended without the record: submitted anew
    if live and todo[0].req.force:
        jobs = "; ".join(f"seed {p.req.seeds[0]}: job {j.job_id} is still {j.state}"
                         for j, p, _ in live)
        stops = " and ".join(submissions.stop_hint(n.cluster, j.job_id) for j, _, n in live)
        raise BenchmarkError(f"--force would start a second job beside a live one ({jobs}): "
                             f"{stops} first, or drop --force to wait for it")
    for job, p, note in live:
        echo(f"seed {p.req.seeds[0]}: job {job.job_id} is still {job.state}; waiting for it "
             f"({submissions.stop_hint(note.cluster, job.job_id)} to stop it)")
    return [(job, p) for job, p, _ in live], fresh


def _executor(opts: SlurmOptions, submitit, name: str):
    """submitit's executor for the cluster, its parameters set (one name for a whole array)."""
    if opts.cluster == "slurm":
        executor = submitit.SlurmExecutor(folder=str(opts.log_folder))
        executor.update_parameters(**sbatch_parameters(opts, name))
    else:  # "local": processes of this machine
        executor = submitit.LocalExecutor(folder=str(opts.log_folder))
        executor.update_parameters(timeout_min=opts.time_minutes, gpus_per_node=opts.gpus_per_job,
                                   tasks_per_node=1, nodes=1)
    return executor


def sbatch_parameters(opts: SlurmOptions, name: str) -> dict:
    """The sbatch options of a job (Slurm's names, as submitit's SlurmExecutor takes them):
    what is submitted and what --dry-run prints."""
    return {"job_name": name, "time": opts.time_minutes, "gpus_per_node": opts.gpus_per_job,
            "cpus_per_task": opts.cpus_per_job, "ntasks_per_node": 1, "nodes": 1,
            **({"partition": opts.partition} if opts.partition else {})}


def array_name(todo: list[Plan]) -> str:
    """One job's own name; an array's, the fields its jobs share (an ablation's differ in
    variant, so its array is flowbench-METHOD-DATASET-PROFILE)."""
    if len(todo) == 1:
        return job_name(todo[0])
    fields = [(p.req.method, p.req.dataset, p.req.profile) for p in todo]
    return "-".join(["flowbench"] + [v for i, v in enumerate(fields[0])
                                     if all(f[i] == v for f in fields)])


def _submit_array(todo: list[Plan], opts: SlurmOptions, submitit, echo) -> list:
    """The seeds to submit, as one job array (one sbatch), each job's note written."""
    if not todo:
        return []
    executor = _executor(opts, submitit, array_name(todo))
    with executor.batch():
        jobs = [executor.submit(Job(p)) for p in todo]
    for job, p in zip(jobs, todo):
        submissions.write(p.targets[0], submissions.Submission(str(job.job_id), opts.log_folder,
                                                               opts.cluster))
        echo(f"submitted job {job.job_id}: {job_name(p)} (log {opts.log_folder})")
    return list(zip(jobs, todo))


def _wait(jobs: list, opts: SlurmOptions, echo) -> list[Path]:
    written, failed = [], 0
    for done, (job, p) in enumerate(jobs):
        try:
            written += [Path(s) for s in job.result()]
            echo(f"job {job.job_id} done: {p.targets[0]}")
        except KeyboardInterrupt:
            raise StopLine(stopped_waiting(len(jobs) - done, opts.cluster)) from None
        except Exception as err:  # submitit's errors carry the job's own traceback as text
            failed += 1
            reason = _reason(err)
            records.write_failure(p.targets[0], reason, str(job.job_id))
            echo(f"job {job.job_id} failed ({job_name(p)}): {reason}")
        submissions.clear(p.targets[0])  # the job ended: its record or its failure note says so
    if failed:
        raise BenchmarkError(f"{failed} of {len(jobs)} jobs failed; `flowbench table` lists "
                             f"them as skipped; their logs are in {opts.log_folder}")
    return written


def stopped_waiting(left: int, cluster: str) -> str:
    """What a stop while the jobs run leaves, and what the same command then does."""
    if cluster == "slurm":
        going = (f"{left} submitted job(s) go on (scancel stops them) and write their records "
                 f"as they end")
    else:
        going = (f"{left} job(s) of this machine go on unless the stop reached them too (a "
                 f"terminal's Ctrl-C does; kill -INT JOB stops one)")
    return (f"stopped waiting; {going}; the same command waits for those still queued or "
            f"running instead of submitting them again, submits those that ended without a "
            f"record and skips seeds with one")


def print_dry_run(todo: list[Plan], opts: SlurmOptions, echo) -> list[Path]:
    """The sbatch script the jobs would go out with (one array) and each job; nothing is
    submitted, no data made, and neither Slurm nor a log folder is needed."""
    if not todo:
        echo("dry run: nothing to submit")
        return []
    if opts.cluster == "slurm":
        _submitit()  # its one line when missing
        from submitit.slurm.slurm import _make_sbatch_string  # how SlurmExecutor writes it
        folder = opts.log_folder.expanduser().absolute()  # as the executor resolves it
        command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit",
                            shlex.quote(str(folder))])
        echo(_make_sbatch_string(command=command, folder=folder,
                                 map_count=len(todo) if len(todo) > 1 else None,
                                 **sbatch_parameters(opts, array_name(todo))))
    what = "array task" if len(todo) > 1 else "job"
    for i, p in enumerate(todo):
        echo(f"{what} {i}: {job_name(p)} (seed {p.req.seeds[0]}) -> {p.targets[0]}")
    echo(f"dry run: {len(todo)} job(s) not submitted" + (
        " (Slurm's sbatch)" if opts.cluster == "slurm" else " (processes of this machine)"))
    return []


def _to_submit(p: Plan, echo) -> bool:
    """A seed whose record is there is not submitted again (unless --force), as a local run
    skips it."""
    if p.targets[0].exists() and not p.req.force:
        echo(f"record exists, skipping seed {p.req.seeds[0]}: {p.targets[0]} (--force redoes it)")
        submissions.clear(p.targets[0])  # a note left by a job that wrote it
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
