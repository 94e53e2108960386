"""`flowbench run --force` replaces a seed's model and record together: the old run folder and
record are set aside (renamed with SUFFIX) while the new ones are trained and scored, dropped
once the new record is written, and put back when the run stops before that, so a record never
names a checkpoint that is not the one it scored.

A run killed outright (SIGKILL, a power cut) leaves them set aside; the next `flowbench run` of
that seed puts them back first, unless the new record was written, which completes the pair.
"""
from __future__ import annotations

import shutil
from pathlib import Path

SUFFIX = ".replaced"


def _aside(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


def put_aside(run_dir: Path, record: Path) -> None:
    for path in (run_dir, record):
        if path.exists():
            path.rename(_aside(path))


def drop(run_dir: Path, record: Path) -> None:
    """The new pair is complete: the old one goes."""
    shutil.rmtree(_aside(run_dir), ignore_errors=True)
    _aside(record).unlink(missing_ok=True)


def restore(run_dir: Path, record: Path, seed: int, echo) -> None:
    """Put back what an unfinished --force set aside, dropping its unfinished run folder."""
    old_run, old_record = _aside(run_dir), _aside(record)
    if not (old_run.exists() or old_record.exists()):
        return
    if record.exists():  # the new record was written last: the new pair is complete
        drop(run_dir, record)
        return
    if old_run.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        old_run.rename(run_dir)
    if old_record.exists():
        old_record.rename(record)
    echo(f"--force of seed {seed} stopped before its new model and record were complete: the "
         f"old ones are back ({run_dir}, {record})")
