"""The run's CSV log: one row every `log_every` steps, appended across resumptions."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence


def upgrade(path: Path, fields: Sequence[str]) -> None:
    """Rewrite a resumed run's log under `fields` (columns it lacks left empty)."""
    with open(path, newline="") as f:
        header = next(csv.reader(f), None)
        if header is None or tuple(header) == tuple(fields):
            return
        rows = list(csv.DictReader(f, fieldnames=header))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, list(fields), restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


class Log:
    """Appends rows to `path`, writing the header when the file is new."""

    def __init__(self, path: Path, fields: Sequence[str]):
        self.fields = tuple(fields)
        new = not path.exists() or path.stat().st_size == 0
        if not new:
            upgrade(path, self.fields)
        self._file = open(path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(self.fields)

    def row(self, values: dict[str, object]) -> None:
        self._writer.writerow([values.get(k, "") for k in self.fields])
        self._file.flush()

    def close(self) -> None:
        self._file.close()
