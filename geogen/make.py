"""Making a dataset: the config, the split/shard/work plan, parallel workers, resume.

Every sample is drawn from its own stream (seed, split, index) (`variants.sample_rng`), work
units are aligned to HDF5 chunks inside a shard, workers render and compress units and the
parent writes the compressed chunks in order; so the output does not depend on `workers`, and
the content does not depend on `shard_size` either.

A run first writes OUT/run.json (the content config); shards appear under their final names
only when whole, each with its sidecar (geogen.shards); OUT/manifest.json is written last (for
a variant that reads image sources, geo+, its `sources` entry names every image that
`bg_source` / `tex_source` index). `resume=True` keeps the shards of an interrupted run with
the same config that are the ones it writes (their attributes, and their bytes by their
sidecar or a sha256 recorded for them) and makes the rest. An interruption (Ctrl-C) or a
failed write (a full disk) removes the unfinished shard before the error goes on; the workers
ignore Ctrl-C and leave stopping to the parent.
`geogen make` passes a `stop` event that its Ctrl-C and SIGTERM handlers set: the run then
stops between two work units, never inside an HDF5 write.

Letters: N samples, T frames, S slots, H = W = image side.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import math
import multiprocessing as mp
import os
import shutil
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
from tqdm import tqdm

from geogen import parts, room, schema, shards
from geogen.errors import GeogenError
from geogen.scene import MOTIONS
from geogen.variants import get_variant, make_sample

GENERATOR_VERSION = "1.0.0"
RUN_RECORD = "run.json"
UNIT_BYTES = 8 << 20  # raw bytes of the largest field per work unit: a few hundred 64 px samples


@dataclass(frozen=True)
class MakeConfig:
    """What to make. `workers` and `out` change where and how fast, never the bytes written;
    nor does `skip_bad_images`, which lets a run go on that would otherwise stop (the files it
    leaves out are named in the manifest's `sources`)."""
    variant: str = "geo"
    n: int = 0                  # training samples
    val: int | None = None      # default n // 100 (the paper's 100k / 1k / 10k)
    test: int | None = None     # default n // 10
    size: int = 64
    frames: int = 2
    seed: int = 0
    out: str = "data/geo"
    workers: int = 0            # 0: one per available core
    shard_size: int = 10000
    # Per-axis subsamples for edge coverage. Odd, so that no pixel is covered exactly half:
    # with 4 (PSD renders 512 px and shrinks to 128, i.e. 4) one edge row in four along a
    # row- or column-aligned side is a tie that the image cannot settle (geogen.schema).
    supersample: int = 5
    motion: str = "translation"  # or "conformal" (geogen.scene: per-frame rotation and scaling)
    # geo+ and articulated+ (the variants that read image sources):
    backgrounds: str | None = None  # image folder, None for the bundled photographs
    textures: str | None = None     # image folder, None for the bundled textures
    # schema.LOOKS: "paper" (greyscale Brodatz-style textures as they are) or "camouflage"
    # (tinted, with crops of the background photos; the former default). Recorded only for
    # the photo variants, so that a Geo manifest stays as it was.
    look: str = schema.DEFAULT_LOOK
    # at most this many images per folder (evenly spaced). Banks are float32 in memory,
    # about 0.7 MB per background image at 64 px (2.6 MB at 128 px) with its mip pyramid.
    max_images: int = 500
    skip_bad_images: bool = False   # leave out unreadable or too small images

    def counts(self) -> dict[str, int]:
        val = self.n // 100 if self.val is None else self.val
        test = self.n // 10 if self.test is None else self.test
        return {"train": self.n, "val": val, "test": test}

    def content(self) -> dict:
        """The settings that determine the data (recorded in every shard and the manifest)."""
        d = dataclasses.asdict(self)
        del d["workers"], d["out"], d["skip_bad_images"]
        if self.variant not in schema.PHOTO_VARIANTS:
            del d["look"]
        d.update(val=self.counts()["val"], test=self.counts()["test"])
        return d


def validate(config: MakeConfig) -> None:
    """Raise GeogenError (one line) for any setting that cannot be made (image folders are
    checked when `make_dataset` loads them)."""
    variant = get_variant(config.variant)
    if config.motion not in MOTIONS:
        raise GeogenError(f"motion must be one of {', '.join(MOTIONS)}, got {config.motion!r}")
    if variant.sources is None and (config.backgrounds or config.textures
                                    or config.skip_bad_images):
        raise GeogenError(f"--backgrounds, --textures and --skip-bad-images apply to geo+ and "
                          f"articulated+, not {config.variant}")
    if config.look not in schema.LOOKS:
        raise GeogenError(f"look must be one of {', '.join(schema.LOOKS)}, got {config.look!r}")
    if variant.sources is None and config.look != schema.DEFAULT_LOOK:
        raise GeogenError(f"--look applies to geo+ and articulated+, not {config.variant}")
    ints = {"n": config.n, "size": config.size, "frames": config.frames, "seed": config.seed,
            "workers": config.workers, "shard_size": config.shard_size,
            "supersample": config.supersample, "max_images": config.max_images,
            **{k: v for k, v in config.counts().items()}}
    for key, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise GeogenError(f"{key} must be an integer, got {value!r}")
    if config.n <= 0:
        raise GeogenError(f"n must be positive, got {config.n}")
    for split in ("val", "test"):
        if config.counts()[split] < 0:
            raise GeogenError(f"{split} must be >= 0, got {config.counts()[split]}")
    if not schema.MIN_SIZE <= config.size <= schema.MAX_SIZE:
        raise GeogenError(f"size must be in {schema.MIN_SIZE}..{schema.MAX_SIZE}, got {config.size}")
    checks = [(config.frames >= 2, f"frames must be >= 2, got {config.frames}"),
              (0 <= config.seed <= schema.MAX_SEED,
               f"seed must be in 0..{schema.MAX_SEED} (2**64 - 1), got {config.seed}"),
              (config.workers >= 0, f"workers must be >= 0 (0: auto), got {config.workers}"),
              (config.shard_size >= 1, f"shard_size must be >= 1, got {config.shard_size}"),
              (1 <= config.supersample <= 16,
               f"supersample must be in 1..16, got {config.supersample}"),
              (config.max_images >= 1, f"max_images must be >= 1, got {config.max_images}")]
    for ok, message in checks:
        if not ok:
            raise GeogenError(message)


def render_one(config: MakeConfig, split: str, index: int) -> dict[str, np.ndarray]:
    """Sample `index` of `split` exactly as `make_dataset` stores it."""
    return make_sample(config, split, index)


@dataclass(frozen=True)
class _Unit:
    """A run of samples inside one shard, starting on a chunk boundary."""
    config: MakeConfig
    split: str
    shard: int
    first: int       # global index of the unit's first sample in its split
    local: int       # its index inside the shard
    count: int
    chunk_n: int


def _render_unit(unit: _Unit) -> dict[str, list[bytes]]:
    """Render and compress a unit: field -> compressed chunks in order (runs in a worker)."""
    c = unit.config
    samples = [render_one(c, unit.split, unit.first + i) for i in range(unit.count)]
    out: dict[str, list[bytes]] = {}
    for name in get_variant(c.variant).fields:
        stacked = np.stack([s[name] for s in samples]).astype(schema.FIELDS[name].dtype, copy=False)
        out[name] = [shards.compress_chunk(stacked[i:i + unit.chunk_n], unit.chunk_n)
                     for i in range(0, unit.count, unit.chunk_n)]
    return out


def _plan(config: MakeConfig) -> list[tuple[str, int, int, int]]:
    """(split, shard index, first sample, count) for every shard."""
    plan = []
    for split, count in config.counts().items():
        for k in range(math.ceil(count / config.shard_size)):
            first = k * config.shard_size
            plan.append((split, k, first, min(config.shard_size, count - first)))
    return plan


def _units(config: MakeConfig, shard: tuple[str, int, int, int], chunk_n: int) -> Iterator[_Unit]:
    split, k, first, count = shard
    slots = len(get_variant(config.variant).slots)
    largest = max(int(np.prod(schema.sample_shape(f, config.frames, config.size, slots))) *
                  schema.FIELDS[f].dtype.itemsize for f in schema.REQUIRED_FIELDS)
    step = chunk_n * max(1, UNIT_BYTES // (largest * chunk_n))
    for local in range(0, count, step):
        yield _Unit(config, split, k, first + local, local, min(step, count - local), chunk_n)


def _shard_file(root: Path, split: str, k: int) -> Path:
    return root / split / shards.shard_name(k)


def _prepare_out(config: MakeConfig, resume: bool, force: bool,
                 part: parts.Part | None = None) -> Path:
    """Create or check OUT; returns it. Refuses to mix runs or overwrite data unasked. A part
    goes on in a folder the other parts share (resume is implied) and never deletes."""
    if resume and force:
        raise GeogenError("use either --resume or --force, not both")
    if part is not None:
        parts.check_out(Path(config.out), part, force)
        resume = True
    root = Path(config.out)
    if root.exists() and not root.is_dir():
        raise GeogenError(f"{root}: exists and is not a folder")
    record = root / RUN_RECORD
    # A run record's temporary is geogen's own, not data: another part may be writing it now.
    holds_data = root.is_dir() and any(not _is_record_tmp(p) for p in root.iterdir())
    ours = [root / name for name in (shards.MANIFEST, RUN_RECORD, parts.PARTS_DIR,
                                     *schema.SPLITS)]
    if holds_data and not force:
        _check_held(root, config, resume)
    replace = holds_data and force  # deleted only once the new data is known to fit
    room.check_room(config, root, resume=holds_data and resume,
               freed=sum(_bytes_under(path) for path in ours) if replace else 0)
    if replace:
        try:
            for path in ours:
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
        except OSError as err:
            raise GeogenError(f"{root}: cannot replace the dataset there "
                              f"({err.strerror or err})") from None
    try:
        # The record first: a part starting beside this one then finds a run it may join, never
        # split folders that no run recorded.
        root.mkdir(parents=True, exist_ok=True)
        shards.write_json_atomic(record, config.content())
        for split in schema.SPLITS:
            (root / split).mkdir(exist_ok=True)
    except OSError as err:
        raise GeogenError(f"{root}: cannot write there ({err.strerror or err})") from None
    # Left by an interrupted run; with a part, only its own: the others' may be being written.
    own = {s[:2] for s in parts.own_shards(_plan(config), part)}
    for stale in root.glob(f"*/*{shards.TMP_SUFFIX}"):
        if part is None or _shard_key(stale) in own:
            stale.unlink()
    return root


def _is_record_tmp(path: Path) -> bool:
    return path.name.startswith(f"{RUN_RECORD}.") and path.name.endswith(shards.TMP_SUFFIX)


def _shard_key(path: Path) -> tuple[str, int] | None:
    """(split, shard index) of a shard file (or its temporary) under OUT/split/; None for a
    file of another name."""
    try:
        return path.parent.name, int(path.name.split(".")[0].split("-")[1])
    except (IndexError, ValueError):
        return None


def _check_held(root: Path, config: MakeConfig, resume: bool) -> None:
    """OUT holds files: only a run of the same settings goes on, and only with --resume (on a
    finished one that rewrites the manifest). Otherwise one line saying what OUT holds."""
    record = root / RUN_RECORD
    if not record.is_file():
        names = sorted(path.name for path in root.iterdir())
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        raise GeogenError(f"{root}: already holds data that no geogen run recorded "
                          f"({', '.join(names[:3])}{more}), not a dataset; choose another --out, "
                          f"or --force to write the dataset there anyway")
    try:
        previous = json.loads(record.read_text())
    except (OSError, ValueError):
        raise GeogenError(f"{record}: unreadable; use --force to start again") from None
    finished = (root / shards.MANIFEST).is_file()
    if previous != config.content():
        raise GeogenError(f"{root}: holds {'a finished' if finished else 'an unfinished'} dataset "
                          f"made with other settings; use --force to replace it or choose "
                          f"another --out")
    if finished and not resume:
        raise GeogenError(f"{root}: already holds this dataset, finished (the same settings); "
                          f"nothing to make (--force makes it again)")
    if not resume:
        raise GeogenError(f"{root}: holds an unfinished run of these settings; pass --resume to "
                          f"finish it or --force to replace it")


def _bytes_under(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


HELD = {signal.SIGINT, signal.SIGTERM}
POLL_S = 0.2  # how often the parent, waiting for a unit, looks at `stop`
END_WAIT_S = 10.0  # how long ending the pool may take before its workers are killed


def _worker_signals() -> None:
    """Pool initializer: Ctrl-C reaches every process of the terminal; the parent alone stops
    the run (it terminates the pool), so the workers print no tracebacks of their own. The
    handlers the parent had when it forked are dropped: the pool ends its workers with
    SIGTERM, which must end them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # held by `_start_pool` until this point
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)


def _start_pool(workers: int):
    """A pool of `workers` processes. Ctrl-C and SIGTERM are held while it forks, so that no
    worker runs the parent's handlers before `_worker_signals` has dropped them (a worker
    that swallowed the pool's SIGTERM would never end); one that came meanwhile reaches the
    parent once the pool exists."""
    # fork: workers start at once and need no importable __main__ (scripts, notebooks).
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    if not hasattr(signal, "pthread_sigmask"):
        return ctx.Pool(workers, initializer=_worker_signals)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        return ctx.Pool(workers, initializer=_worker_signals)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _end_pool(pool, wait_s: float = END_WAIT_S) -> None:
    """Terminate `pool` and wait for it; if that has not returned within `wait_s`, kill its
    workers, and after another `wait_s` stop waiting (the run is ending either way).
    Pool.terminate can wait forever: on a worker forked with the signals held that never
    reached `_worker_signals`, or on a result cut mid-message by the SIGTERM it sends."""
    ender = threading.Thread(target=pool.terminate, name="geogen-end-pool", daemon=True)
    ender.start()
    ender.join(wait_s)
    if ender.is_alive():
        for proc in getattr(pool, "_pool", ()):  # the pool's worker processes
            if proc.exitcode is None:
                proc.kill()
        ender.join(wait_s)
    if not ender.is_alive():
        pool.join()


def _stopping(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise KeyboardInterrupt


def _polled(results, stop: threading.Event | None) -> Iterator:
    """The pool's results in order; while it waits for one, it looks at `stop` every POLL_S."""
    while True:
        try:
            yield results.next(timeout=POLL_S)
        except mp.TimeoutError:
            _stopping(stop)
        except StopIteration:
            return


def write_failure(root: Path, err: OSError) -> GeogenError:
    """One line for a write that failed (most likely a full disk), after the cleanup."""
    full = err.errno == errno.ENOSPC or "No space left" in str(err)
    reason = "the disk is full" if full else (err.strerror or str(err).splitlines()[0])
    return GeogenError(f"{root}: cannot write the dataset ({reason}); nothing half-written is "
                       f"left and the whole shards are kept: rerun with --resume to finish")


def _workers(config: MakeConfig) -> int:
    if config.workers:
        return config.workers
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def make_dataset(config: MakeConfig, resume: bool = False, force: bool = False,
                 progress: bool = True, stop: threading.Event | None = None,
                 part: parts.Part | None = None) -> Path:
    """Make the dataset `config` describes; returns the output root (see the module docstring).
    With `part`, only that part's shards and its marker, no manifest (geogen.parts).

    `stop`, once set, ends the run between two work units (before any output when it is set
    while the sources load) with a KeyboardInterrupt, as a Ctrl-C does: the unfinished shard
    removed, the whole ones kept. A signal handler sets it where raising at once could cut
    an HDF5 write and leave its .tmp, or land in a weakref callback that swallows it."""
    validate(config)
    variant = get_variant(config.variant)
    # Load the image sources here, before any output or worker exists: a bad folder fails
    # early, and forked workers inherit the loaded banks instead of loading them again.
    used_sources = variant.sources(config) if variant.sources else None
    _stopping(stop)
    root = _prepare_out(config, resume, force, part)
    chunk_n = shards.chunk_samples(config.size, config.frames, len(variant.slots))
    fields = variant.fields
    plan = _plan(config)
    mine = parts.own_shards(plan, part)
    head = run_head(config)
    todo = _to_make(root, config, mine)
    units = [u for s in todo for u in _units(config, s, chunk_n)]
    left = {(s[0], s[1]): s[3] for s in todo}   # samples still to write per shard

    workers = min(_workers(config), max(1, len(units)))
    unit_name = "pair" if config.frames == 2 else "clip"
    bar = tqdm(total=sum(left.values()), unit=unit_name, disable=not progress, smoothing=0.1,
               desc=f"geogen {config.variant} {config.size}px")
    writer = None
    pool = None
    try:
        if workers > 1:
            pool = _start_pool(workers)
            results = _polled(pool.imap(_render_unit, units), stop)
        else:
            results = map(_render_unit, units)
        for unit, chunks in zip(units, results):
            _stopping(stop)
            key = (unit.split, unit.shard)
            if writer is None:
                _, _, first, count = next(s for s in todo if s[:2] == key)
                writer = shards.ShardWriter(
                    _shard_file(root, *key), count, fields, config.frames,
                    config.size, chunk_n, shards.shard_attrs(head, unit.split, first, count),
                    slots=len(variant.slots))
            for name, blobs in chunks.items():
                for j, blob in enumerate(blobs):
                    writer.write_chunk(unit.local + j * chunk_n, name, blob)
            left[key] -= unit.count
            bar.update(unit.count)
            if left[key] == 0:
                writer.close()
                writer = None
    except BaseException as err:
        if writer is not None:
            writer.abort()
        if isinstance(err, OSError):
            raise write_failure(root, err) from None
        raise
    finally:
        bar.close()
        if pool is not None:
            _end_pool(pool)

    sha = {(split, k): shards.file_sha256(_shard_file(root, split, k)) for split, k, _, _ in mine}
    if part is not None:
        entries = [{"file": f"{split}/{shards.shard_name(k)}", "first_index": first,
                    "count": count, "sha256": sha[(split, k)]} for split, k, first, count in mine]
        try:
            parts.write_marker(root, part, config.content(), entries, used_sources)
        except OSError as err:
            raise write_failure(root, err) from None
        return root
    manifest = build_manifest(config, plan, sha, used_sources)
    try:
        shards.write_json_atomic(root / shards.MANIFEST, manifest)
    except OSError as err:
        raise write_failure(root, err) from None
    return root


def run_head(config: MakeConfig) -> dict:
    """What every shard and the manifest of a run record of it (`shards.shard_attrs`)."""
    return {"variant": config.variant, "seed": config.seed, "size": config.size,
            "frames": config.frames, "generator_version": GENERATOR_VERSION,
            "schema_version": schema.SCHEMA_VERSION, "config": config.content()}


def _to_make(root: Path, config: MakeConfig,
             mine: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
    """The shards of `mine` to make: all but those already there that are the ones this run
    writes (`shards.shard_problem`: their attributes, their sidecar and any sha256 recorded
    for them agree), never judged by their index range alone."""
    head, recorded = run_head(config), _recorded(root, config)
    return [(split, k, first, count) for split, k, first, count in mine
            if shards.shard_problem(_shard_file(root, split, k),
                                    shards.shard_attrs(head, split, first, count),
                                    recorded.get((split, k))) is not None]


def _recorded(root: Path, config: MakeConfig) -> dict[tuple[str, int], str]:
    """The sha256 of each shard that a finished run of `config` (its manifest) or a finished
    part (its marker) recorded in `root`, by (split, shard index)."""
    sha = {}
    try:
        manifest = shards.read_manifest(root)
        if manifest.get("config") == config.content():
            for split, entries in manifest["shards"].items():
                sha.update({(split, parts.index_of(e["file"])): e["sha256"] for e in entries})
    except (GeogenError, KeyError, TypeError, ValueError, IndexError, AttributeError):
        pass  # none recorded: a shard's sidecar must then vouch for it
    sha.update(parts.recorded_shards(root, config.content()))
    return sha


def build_manifest(config: MakeConfig, plan: list[tuple[str, int, int, int]],
                   sha: dict[tuple[str, int], str], sources: dict | None) -> dict:
    """The manifest of a finished dataset: its settings and every shard with its sha256 (by
    (split, shard index)); a one-part run and the merge of parts both write this one."""
    variant = get_variant(config.variant)
    manifest = {
        **run_head(config), "counts": config.counts(),
        "chunk_samples": shards.chunk_samples(config.size, config.frames, len(variant.slots)),
        "fields": list(variant.fields),
        "shards": {split: [{"file": f"{split}/{shards.shard_name(k)}", "first_index": first,
                            "count": count, "sha256": sha[(split, k)]}
                           for sp, k, first, count in plan if sp == split]
                   for split in schema.SPLITS},
    }
    manifest.update(variant.manifest_entries)   # slots, classes, ... (none for Geo's slots)
    if sources is not None:
        manifest["sources"] = sources
    return manifest
