"""The run's CSV log: one row every `log_every` steps, appended across resumptions, and never
ahead of the checkpoint a run resumed from."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence


def upgrade(path: Path, fields: Sequence[str], upto: int | None = None) -> None:
    """Rewrite a resumed run's log under `fields` (columns it lacks left empty), keeping only
    the rows of steps <= `upto` (None: every row). A run killed after its last checkpoint
    logged steps that its resume trains again: their rows go, so no step is logged twice."""
    with open(path, newline="") as f:
        header = next(csv.reader(f), None)
        rows = [] if header is None else list(csv.DictReader(f, fieldnames=header))
    kept = [r for r in rows if upto is None or _step(r) <= upto]
    if header is not None and tuple(header) == tuple(fields) and len(kept) == len(rows):
        return
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, list(fields), restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(kept)
    tmp.replace(path)


def _step(row: dict[str, str]) -> float:
    try:
        return int(row.get("step") or "")
    except ValueError:  # a row cut short by a kill: past any checkpoint
        return float("inf")


class Log:
    """Appends rows to `path`, writing the header when the file is new; a file already there is
    cut back to the rows of steps <= `upto` (the step the run starts from)."""

    def __init__(self, path: Path, fields: Sequence[str], upto: int | None = None):
        self.fields = tuple(fields)
        new = not path.exists() or path.stat().st_size == 0
        if not new:
            upgrade(path, self.fields, upto)
        self._file = open(path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(self.fields)

    def row(self, values: dict[str, object]) -> None:
        self._writer.writerow([values.get(k, "") for k in self.fields])
        self._file.flush()

    def close(self) -> None:
        self._file.close()
