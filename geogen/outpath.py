"""Output paths, checked before any work: a run that can only fail to write its result fails
first, in one line, not after its data, training or evaluation.

A path is usable when its nearest existing folder takes a new file: a path under a file, a
folder given for a file (or a file for a folder), /proc, a read-only mount or a folder without
write permission are refused, each by the error the system gives. A full disk shows only when
the bytes are written; the writers turn that into one line too.
"""
from __future__ import annotations

import os
from pathlib import Path

from geogen.errors import GeogenError

PROBE = ".write-check"  # the empty file created (and removed at once) in the nearest folder


def check_output_folder(path: str | Path, option: str) -> Path:
    """`path` as a folder that can be created (or is there) and written to; GeogenError naming
    `option` otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise GeogenError(f"{option} {path} is a file, not a folder")
    _check_writable(path, option)
    return path


def check_output_file(path: str | Path, option: str) -> Path:
    """`path` as a file that can be written (replacing one there); GeogenError naming `option`
    otherwise."""
    path = Path(path)
    if path.is_dir():
        raise GeogenError(f"{option} {path} is a folder; give a file name")
    _check_writable(path.parent, option, path)
    return path


def _check_writable(folder: Path, option: str, shown: Path | None = None) -> None:
    shown = folder if shown is None else shown
    base = folder.absolute()
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise GeogenError(f"{option} {shown} lies under {base}, which is a file, not a folder")
    try:
        _create(base / f"{PROBE}-{os.getpid()}")
    except OSError as err:
        raise GeogenError(f"{option} {shown} cannot be written: {err.strerror or err} "
                          f"(in {base})") from None


def _create(probe: Path) -> None:
    """Create and remove an empty file: what any writer under that folder needs first."""
    os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    probe.unlink()
