"""Will a dataset fit? Its size on disk estimated before any work, against the free space.

The raw size is the schema's shapes and dtypes; when it does not fit, a few samples are rendered
and deflated as the shards store them (Geo deflates 30- to 90-fold, so the raw size alone would
refuse what fits). `config` is a `geogen.make.MakeConfig`.
"""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np

from geogen import schema, shards
from geogen.errors import GeogenError
from geogen.variants import get_variant, make_sample

PROBE = 4                 # samples rendered to measure how far deflate shrinks a sample
SHARD_BYTES = 40 << 10    # HDF5's metadata in a shard: 38-40 kB measured, more with many chunks


def raw_sample_bytes(config) -> int:
    """One sample's bytes uncompressed: its fields' shapes and dtypes in the schema."""
    variant = get_variant(config.variant)
    return sum(int(np.prod(schema.sample_shape(f, config.frames, config.size, len(variant.slots))))
               * schema.FIELDS[f].dtype.itemsize for f in variant.fields)


def stored_sample_bytes(config) -> float:
    """About how many bytes one sample takes in a shard: the first PROBE training samples,
    rendered and deflated as the shards store them (a few seconds at 512 px)."""
    samples = [make_sample(config, "train", i) for i in range(PROBE)]
    total = 0
    for name in get_variant(config.variant).fields:
        stacked = np.stack([s[name] for s in samples]).astype(schema.FIELDS[name].dtype,
                                                              copy=False)
        total += len(shards.compress_chunk(stacked, PROBE))
    return total / PROBE


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.1f} {unit}"
        n /= 1000


def left_to_make(config, root: Path, resume: bool) -> tuple[int, int]:
    """(samples, shards) not yet in whole shards; on resume, whole shards are found by name
    (no plan of every shard, which a huge --n would take long to list)."""
    counts = config.counts()
    samples = sum(counts.values())
    parts = sum(math.ceil(c / config.shard_size) for c in counts.values())
    if not resume:
        return samples, parts
    for split, count in counts.items():
        for path in (root / split).glob("shard-*.h5"):
            try:
                k = int(path.stem.split("-")[1])
            except (IndexError, ValueError):
                continue
            first = k * config.shard_size
            n = min(config.shard_size, count - first)
            if n > 0 and _spans(path, first, n):
                samples, parts = samples - n, parts - 1
    return samples, parts


def _spans(path: Path, first: int, count: int) -> bool:
    """Whether `path` is a readable shard of samples [first, first + count). Enough for the
    room: a shard that `make` then finds changed (shards.shard_problem) is remade in place of
    itself."""
    try:
        with shards.open_shard(path) as f:
            return int(f.attrs["first_index"]) == first and int(f.attrs["count"]) == count
    except (GeogenError, KeyError, ValueError, TypeError):
        return False


def check_room(config, root: Path, resume: bool = False, freed: int = 0) -> None:
    """Refuse, in one line, a dataset the disk under `root` cannot hold (`freed`: bytes that
    --force deletes first); the deflated size is measured only when the raw one does not fit."""
    todo, parts = left_to_make(config, root, resume)
    if todo <= 0:
        return
    where = root
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free + freed
    if raw_sample_bytes(config) * todo + SHARD_BYTES * parts <= free:
        return
    each = stored_sample_bytes(config)
    need = each * todo + SHARD_BYTES * parts
    if need > free:
        counted = " with what --force deletes" if freed else ""
        raise GeogenError(f"{root}: {todo:,} samples need about {human_bytes(need)} on disk "
                          f"({human_bytes(each)} each, deflated), but {where} has "
                          f"{human_bytes(free)} free{counted}; make fewer or choose another --out")
