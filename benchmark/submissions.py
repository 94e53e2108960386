"""The note of a submitted job, beside its record's place: which job (its id, submitit's folder,
the cluster) is to write that record. A `flowbench run --executor slurm` stopped while it waited
(a Ctrl-C) leaves its jobs queued or running; the same command run again finds their notes and
waits for the jobs still alive instead of submitting their seeds a second time.

A note is JSON under a name that is not `*.json`, so the record readers never see it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from benchmark import records

SUBMITTED_SUFFIX = ".submitted"  # beside a record's place: the job that is to write it


@dataclass(frozen=True)
class Submission:
    job_id: str  # Slurm's (an array task's is "ARRAY_INDEX"); the local controller's pid
    folder: Path  # submitit's folder: the job's pickles, its result and its logs
    cluster: str  # "slurm" or "local" (submitit's executors)


def note_path(target: Path) -> Path:
    return Path(target).with_name(Path(target).name[:-len(".json")] + SUBMITTED_SUFFIX)


def write(target: Path, sub: Submission) -> Path:
    """Atomically (a note half written would read as no note, and the seed go out twice)."""
    return records.write_text_atomic(note_path(target), records.json_text({"submitted": {
        "record": str(target), "job": sub.job_id, "folder": str(sub.folder.absolute()),
        "cluster": sub.cluster, "at": records.now()}}))


def read(target: Path) -> Submission | None:
    """The note for `target`; None when there is none or it cannot be read (a new submission
    then replaces it)."""
    try:
        note = json.loads(note_path(target).read_text())["submitted"]
        return Submission(str(note["job"]), Path(note["folder"]), str(note["cluster"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear(target: Path) -> None:
    note_path(target).unlink(missing_ok=True)


def job_of(sub: Submission, submitit):
    """submitit's handle on the noted job, which `done()` and `result()` work on as on a job
    this process submitted."""
    if sub.cluster == "slurm":
        return submitit.SlurmJob(folder=sub.folder, job_id=sub.job_id)
    return _noted_local_job(submitit)(folder=sub.folder, job_id=sub.job_id)


def alive(job) -> bool:
    """submitit's rule: a job is alive until its result is written or its scheduler's state is
    a final one (Slurm: not PENDING, RUNNING, REQUEUED, COMPLETING, PREEMPTED or UNKNOWN)."""
    return not job.done(force_check=True)


def stop_hint(cluster: str, job_id: str) -> str:
    """How to stop a job for good: scancel; a local job's controller stops its job on SIGINT
    (a SIGTERM it hands to the job, which saves its checkpoint and is started again)."""
    return f"scancel {job_id}" if cluster == "slurm" else f"kill -INT {job_id}"


def _noted_local_job(submitit):
    class NotedLocalJob(submitit.LocalJob):
        """A local job another process submitted: submitit knows a local job's state only
        through the process handle of the process that started it; here it is read from
        /proc (the job id is its controller's pid)."""

        def get_info(self, mode: str = "force") -> dict[str, str]:
            if _controller_runs(int(self.job_id), self.paths.folder):
                return {"jobState": "RUNNING"}
            return {"jobState": "FINISHED" if self.paths.result_pickle.exists()
                    else "NO PROCESS AND NO RESULT"}

    return NotedLocalJob


def _controller_runs(pid: int, folder: Path) -> bool:
    """Whether `pid` is still submitit's local controller for `folder` (not a process that
    took the number since)."""
    for _ in range(50):  # a process just started reads an empty cmdline for a moment
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return False
        if cmdline:
            break
        time.sleep(0.05)
    return "submitit.local._local" in cmdline and str(Path(folder).absolute()) in cmdline
