"""Output paths, checked before any work: a run that can only fail to write its result fails
first, in one line, not after its data, training or evaluation.

A path is usable when its nearest existing folder takes a new file: a path under a file, a
folder given for a file (or a file for a folder), /proc, a read-only mount or a folder without
write permission are refused, each by the error the system gives. So are an empty path (an
unset shell variable, which would otherwise mean the working folder), a path whose symbolic
links loop and a name longer than the file system allows. A full disk shows only when the bytes
are written; the writers turn that into one line too.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

import click

from geogen.errors import GeogenError

PROBE = ".write-check"  # the empty file created (and removed at once) in the nearest folder


def check_output_folder(path: str | Path, option: str) -> Path:
    """`path` as a folder that can be created (or is there) and written to; GeogenError naming
    `option` otherwise."""
    path = _resolvable(path, option)
    if path.exists() and not path.is_dir():
        raise GeogenError(f"{option} {path} is a file, not a folder")
    _check_writable(path, option)
    return path


def check_output_file(path: str | Path, option: str) -> Path:
    """`path` as a file that can be written (replacing one there); GeogenError naming `option`
    otherwise."""
    path = _resolvable(path, option)
    if path.is_dir():
        raise GeogenError(f"{option} {path} is a folder; give a file name")
    _check_writable(path.parent, option, path)
    return path


def _resolvable(path: str | Path, option: str) -> Path:
    """`path` as a Path, refused when empty, over-long or looping; a missing path passes (its
    nearest existing folder is checked next)."""
    if str(path) == "":  # Path("") is ".": an unset variable would write into the working folder
        raise GeogenError(f"{option} is empty (an unset shell variable?); give a path")
    path = Path(path)
    base = _nearest_folder(path.absolute().parent)
    name_max = _limit(base, "PC_NAME_MAX", 255)
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise GeogenError(f"{option} {_short(path)}: the name {_short(part)} is "
                              f"{len(os.fsencode(part))} bytes, more than the {name_max} the "
                              f"file system allows")
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise GeogenError(f"{option} {path} cannot be resolved: its symbolic links form a "
                              f"loop") from None
        if err.errno == errno.ENAMETOOLONG:
            raise GeogenError(f"{option} {_short(path)}: the path is longer than the file "
                              f"system allows") from None
    return path


def _nearest_folder(path: Path) -> Path:
    """The nearest of `path` and its parents that exists (a name too long counts as missing)."""
    while path != path.parent:
        try:
            if path.exists():
                return path
        except OSError:
            pass
        path = path.parent
    return path


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return os.pathconf(folder, name)
    except (OSError, ValueError):
        return default


def _short(text: str | Path, keep: int = 40) -> str:
    text = str(text)
    return text if len(text) <= keep else f"{text[:keep]}..."


def _check_writable(folder: Path, option: str, shown: Path | None = None) -> None:
    shown = folder if shown is None else shown
    base = _nearest_folder(folder.absolute())
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


class PathParam(click.Path):
    """click's path parameter that refuses an empty string (`--out "$UNSET"`), which would
    otherwise become the working directory: every path option of the three commands uses it."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("is empty (an unset shell variable?); name a path", param, ctx)
        return super().convert(value, param, ctx)
