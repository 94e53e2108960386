"""Reading a generated folder: the one reader of the shards, for every trainer and the benchmark.

`open_split` checks a split against its manifest; `Split.read` takes whole fields (or a range
of their frame axis, a rank's rows, a dtype) into memory, `Split.chunks` hands them out a few
rows at a time, `pairs` turns clips into consecutive frame pairs, and `GeoDataset` serves one
sample at a time to a torch DataLoader. Every bad folder or request is a one-line GeogenError,
and so is every value off the contract that it reads (`schema.value_problem`: NaN flow, a label
past the classes, ...), so that no method trains or scores on it.

Letters: N samples, T frames, S slots, H = W = image side.
"""
from __future__ import annotations

import os
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from geogen import schema, shards
from geogen.errors import GeogenError

Pick = int | slice  # a frame index (the axis is dropped) or a range of frames


@dataclass(frozen=True)
class _Column:
    """How one field is read: which part of each sample's frame axis, into which dtype."""
    name: str
    stored: tuple[int, ...]  # per-sample shape in the shard
    pick: tuple              # () or (index or slice of the frame axis,)
    shape: tuple[int, ...]   # per-sample shape handed out
    dtype: np.dtype          # dtype handed out


@dataclass(frozen=True, eq=False)
class Split:
    """One split of a generated folder, its manifest checked; read it with `read` or `chunks`."""
    root: Path
    name: str
    manifest: dict
    size: int
    frames: int                              # T
    slots: tuple[str, ...]                   # the S slot names (schema.slots_of)
    fields: tuple[str, ...]                  # the fields its shards store
    shards: tuple[tuple[Path, int], ...]     # (path, rows) of each shard, in index order
    bounds: schema.Bounds                    # what its values may be

    @property
    def count(self) -> int:
        return sum(n for _, n in self.shards)

    def check(self) -> None:
        """Open every shard and check that each field holds the rows, shape and dtype the
        manifest promises, reading no data: a folder edited or cut since it was made is
        refused whole, where `read` checks only the shards it reads."""
        cols = self._columns(self.fields)
        for path, rows in self.shards:
            with shards.open_shard(path) as f:
                _check_shard(f, path, rows, cols)

    def rows(self, limit: int | None = None, rank: int = 0, world: int = 1) -> tuple[int, int]:
        """Rows [lo, hi) of rank `rank` of `world`: each holds limit // world of the first
        `limit` rows (all when None), the rest dropped so that every rank holds as many."""
        if limit is not None and limit < 0:
            raise GeogenError(f"limit must be >= 0 (or None for all), got {limit}")
        if world < 1 or not 0 <= rank < world:
            raise GeogenError(f"rank {rank} of {world} does not exist")
        share = (self.count if limit is None else min(int(limit), self.count)) // world
        return rank * share, (rank + 1) * share

    def read(self, fields: Sequence[str], limit: int | None = None, *,
             t: Mapping[str, Pick] | None = None, dtypes: Mapping[str, object] | None = None,
             rank: int = 0, world: int = 1, chunk: int | None = None) -> dict[str, np.ndarray]:
        """field -> (N, ...) array of the rows `rows(limit, rank, world)`.

        t: per field, a frame index or range of its frame axis (T frames; T - 1 for the flows):
           {"frames": slice(0, 2), "flow": 0} reads a clip's first pair and the flow between.
        dtypes: per field, the dtype to hand out, converted a piece at a time (no copy of the
           whole field in the stored dtype exists).
        chunk: rows read at a time (None: each shard's rows at once); it bounds the memory of a
           conversion. Fields read in their stored dtype go straight into the output.
        """
        cols, lo, hi = self._plan(fields, limit, t, dtypes, rank, world, chunk)
        out = {c.name: np.empty((hi - lo,) + c.shape, c.dtype) for c in cols}
        with closing(self._pieces(cols, lo, hi, chunk)) as pieces:  # a failed read closes it
            for f, a, b, at in pieces:
                for c in cols:
                    if c.dtype == schema.FIELDS[c.name].dtype:
                        with _reading(f, c.name):
                            f[c.name].read_direct(out[c.name], (slice(a, b),) + c.pick,
                                                  np.s_[at:at + b - a])
                        _check_values(f, c, out[c.name][at:at + b - a], a, self.bounds)
                    else:
                        out[c.name][at:at + b - a] = _read(f, c, a, b, self.bounds)
        return out

    def chunks(self, fields: Sequence[str], limit: int | None = None, *,
               t: Mapping[str, Pick] | None = None, dtypes: Mapping[str, object] | None = None,
               rank: int = 0, world: int = 1,
               chunk: int | None = None) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """What `read` returns, a piece at a time: (first row, {field: (n, ...) array}), n at
        most `chunk`, no piece spanning two shards. The request is checked before the first."""
        cols, lo, hi = self._plan(fields, limit, t, dtypes, rank, world, chunk)
        return self._chunks(cols, lo, hi, chunk)

    def _chunks(self, cols: list[_Column], lo: int, hi: int, chunk: int | None):
        with closing(self._pieces(cols, lo, hi, chunk)) as pieces:  # a failed read closes it
            for f, a, b, at in pieces:
                yield at, {c.name: _read(f, c, a, b, self.bounds) for c in cols}

    def _columns(self, fields: Sequence[str], t: Mapping[str, Pick] | None = None,
                dtypes: Mapping[str, object] | None = None) -> list[_Column]:
        """The request for `fields`, checked against the manifest and the schema."""
        t, dtypes = dict(t or {}), dict(dtypes or {})
        for name in (*t, *dtypes):
            if name not in fields:
                raise GeogenError(f"a frame range or dtype is given for {name!r}, "
                                  f"which is not read")
        cols = []
        for name in fields:
            if name not in self.fields or name not in schema.FIELDS:
                raise GeogenError(f"field {name!r} is not stored here "
                                  f"(stored: {', '.join(self.fields)})")
            stored = schema.sample_shape(name, self.frames, self.size, len(self.slots))
            pick, shape = (), stored
            if name in t:
                pick, shape = self._pick(name, t[name], stored)
            try:
                dtype = np.dtype(dtypes.get(name, schema.FIELDS[name].dtype))
            except TypeError as err:
                raise GeogenError(f"{name!r}: not a dtype ({err})") from None
            kept = np.dtype(schema.FIELDS[name].dtype)
            # A float may narrow (precision, not values), an integer never: int8 frames would
            # wrap 200 to -56 without a word.
            if dtype.kind in "biu" and not np.can_cast(kept, dtype, casting="safe"):
                raise GeogenError(f"{name!r} is stored as {kept}; {dtype} cannot hold its values "
                                  f"without wrapping or cutting them (ask for {kept} or wider)")
            cols.append(_Column(name, stored, pick, shape, dtype))
        return cols

    def _pick(self, name: str, pick: Pick, stored: tuple[int, ...]) -> tuple[tuple, tuple]:
        """(index into a sample, per-sample shape) for a frame index or range of `name`."""
        # A field has a frame axis when its first dimension follows T (T or T - 1 long).
        if not stored or stored[0] == schema.sample_shape(name, self.frames + 1, self.size,
                                                          len(self.slots))[0]:
            raise GeogenError(f"field {name!r} has no frame axis")
        n = stored[0]
        if isinstance(pick, (int, np.integer)) and not isinstance(pick, bool):
            if not -n <= pick < n:
                raise GeogenError(f"frame {pick} of {name!r} is outside its {n} frames")
            return (int(pick) % n,), stored[1:]
        if isinstance(pick, slice) and (pick.step is None or pick.step > 0):
            span = range(*pick.indices(n))
            if not span:
                raise GeogenError(f"frames {pick.start}:{pick.stop} of {name!r} select none "
                                  f"of its {n}")
            return (slice(span.start, span.stop, span.step),), (len(span),) + stored[1:]
        raise GeogenError(f"frames of {name!r}: want an index or a forward slice, got {pick!r}")

    def _plan(self, fields, limit, t, dtypes, rank, world, chunk):
        if chunk is not None and chunk < 1:
            raise GeogenError(f"chunk must be >= 1 (or None), got {chunk}")
        return (self._columns(fields, t, dtypes), *self.rows(limit, rank, world))

    def _pieces(self, cols: list[_Column], lo: int, hi: int, chunk: int | None):
        """(open shard, its rows a:b, first output row) covering rows [lo, hi), at most `chunk`
        rows each; only the shards overlapping [lo, hi) are opened, each checked first."""
        start = 0
        for path, count in self.shards:
            if start >= hi:
                break
            a, b = max(lo, start), min(hi, start + count)
            if a < b:
                with shards.open_shard(path) as f:
                    _check_shard(f, path, count, cols)
                    step = chunk or b - a
                    for c in range(a, b, step):
                        yield f, c - start, min(c + step, b) - start, c - lo
            start += count


def _check_shard(f, path: Path, rows: int, cols: Sequence[_Column]) -> None:
    """A shard's fields must hold the rows, shape and dtype its manifest promises: the output
    is allocated from the manifest, so rows a shard lacks would be handed out unread."""
    for c in cols:
        with _reading(f, c.name):
            have = f[c.name].dtype, f[c.name].shape
        want = schema.FIELDS[c.name].dtype, (rows,) + c.stored
        if have != want:
            raise GeogenError(f"{path}: {c.name!r} is {have[0]}{list(have[1])}, the manifest "
                              f"says {want[0]}{list(want[1])}")


@contextmanager
def _reading(f, name: str):
    try:
        yield
    except (OSError, KeyError, ValueError) as err:  # h5py's kinds for a broken or foreign file
        first = str(err).splitlines()[0] if str(err) else err.__class__.__name__
        raise GeogenError(f"{f.filename}: cannot read {name!r} ({first})") from None


def _read(f, col: _Column, a: int, b: int, bounds: schema.Bounds) -> np.ndarray:
    """Rows a:b of one field of an open shard, picked, checked and converted:
    (b - a, *col.shape)."""
    with _reading(f, col.name):
        values = np.asarray(f[col.name][(slice(a, b),) + col.pick])
    _check_values(f, col, values, a, bounds)
    return values.astype(col.dtype, copy=False)


def _check_values(f, col: _Column, values: np.ndarray, a: int, bounds: schema.Bounds) -> None:
    """Refuse rows a:a+n of a field (as stored) whose values break the contract."""
    problem = schema.value_problem(col.name, values, bounds, a)
    if problem:
        raise GeogenError(f"{f.filename}: field {col.name!r} {problem}; not data that geogen "
                          f"makes, so it is not read (geogen verify lists every problem)")


def open_split(root: str | Path, split: str) -> Split:
    """A split of a generated folder; its manifest's counts are checked against its shard list
    here, each shard's rows against the manifest when it is read."""
    root = Path(root)
    if not (root / shards.MANIFEST).is_file():
        raise GeogenError(f"{root} is not a geogen dataset (no {shards.MANIFEST})")
    if split not in schema.SPLITS:
        raise GeogenError(f"unknown split {split!r} (known: {', '.join(schema.SPLITS)})")
    manifest = shards.read_manifest(root)
    problems = schema.manifest_problems(manifest)
    if problems:
        raise GeogenError(f"{root / shards.MANIFEST}: {problems[0]}")
    try:
        bounds = schema.bounds_of(manifest)
        parts = tuple(shards.shard_paths(root, manifest, split))
        size, frames = int(manifest["size"]), int(manifest["frames"])
        count = int(manifest["counts"].get(split, 0))
        fields = tuple(manifest.get("fields", schema.REQUIRED_FIELDS))
        slots = schema.slots_of(manifest)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise GeogenError(f"{root / shards.MANIFEST}: malformed "
                          f"({err.__class__.__name__}: {err})") from None
    listed = sum(n for _, n in parts)
    if listed != count or any(n < 0 for _, n in parts):
        raise GeogenError(f"{root / shards.MANIFEST}: counts {count} {split} samples but its "
                          f"shards list {listed}")
    if size < 1 or frames < 2:  # every shape is drawn from these two; 0 would divide by zero
        raise GeogenError(f"{root / shards.MANIFEST}: malformed (size {size}, frames {frames})")
    unknown = [name for name in fields if name not in schema.FIELDS]
    if unknown:
        raise GeogenError(f"{root / shards.MANIFEST}: names unknown field {unknown[0]!r}")
    return Split(root, split, manifest, size, frames, slots, fields, parts, bounds)


def read_split(root: str | Path, split: str, fields: Sequence[str],
               limit: int | None = None) -> dict[str, np.ndarray]:
    """The whole split (or its first `limit` samples) in memory: field -> (N, ...) array."""
    return open_split(root, split).read(fields, limit)


def pairs(clips: np.ndarray) -> np.ndarray:
    """Clips (N, T, ...) -> their consecutive frame pairs (N * (T - 1), 2, ...): clip n gives
    (0, 1), (1, 2), ... in order. Clips of two frames are their own pairs and come back as
    they are, without a copy."""
    n, t = clips.shape[:2]
    if t < 2:
        raise GeogenError(f"clips of {t} frame give no pairs")
    if t == 2:
        return clips
    return np.stack([clips[:, :-1], clips[:, 1:]], 2).reshape(n * (t - 1), 2, *clips.shape[2:])


class GeoDataset(Dataset):
    """Item i of a split: {field: tensor} with the schema's dtype and per-sample shape.

    HDF5 files are opened lazily, once per process, so the dataset can be handed to DataLoader
    workers (each worker opens its own handles after the fork).
    """

    def __init__(self, root: str | Path, split: str, fields: Sequence[str] = ("frames",)):
        self.root = Path(root)
        self._split = open_split(self.root, split)
        self._cols = self._split._columns(fields)
        self.split, self.fields = split, tuple(fields)
        self.size, self.frames = self._split.size, self._split.frames
        self._starts = np.cumsum([0] + [n for _, n in self._split.shards])       # (shards + 1,)
        self._files: dict[int, object] = {}
        self._pid = None

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _file(self, k: int):
        if self._pid != os.getpid():   # a new worker process: never reuse the parent's handles
            self._files, self._pid = {}, os.getpid()
        if k not in self._files:
            path, rows = self._split.shards[k]
            f = shards.open_shard(path)
            try:
                _check_shard(f, path, rows, self._cols)
            except GeogenError:
                f.close()
                raise
            self._files[k] = f
        return self._files[k]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"index {i} out of range for {len(self)} samples")
        i = i % len(self)
        k = int(np.searchsorted(self._starts, i, side="right") - 1)
        f = self._file(k)
        local = i - int(self._starts[k])
        return {c.name: torch.from_numpy(_read(f, c, local, local + 1, self._split.bounds)[0, ...])
                for c in self._cols}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_files"], state["_pid"] = {}, None   # h5py handles do not pickle
        return state
