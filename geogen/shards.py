"""Sharded HDF5 storage: writing shards chunk by chunk, the manifest, checksums and verification.

Layout: ROOT/{train,val,test}/shard-NNNNN.h5 and ROOT/manifest.json. Each shard holds one HDF5
dataset per schema field, shaped (count, *per-sample shape), chunked along N in groups of a few
samples and compressed with deflate, and the attributes in `schema.SHARD_ATTRS`. Beside each
shard, `shard-NNNNN.h5.sha256` (sha256sum's format) holds the sha256 it had when it was written:
a shard changed since (an edit, another run's file copied over it) is told by it before any
manifest names it (`shard_problem`, `verify`); the shards' own bytes, and so the manifest and
its hash, are what they were before these files existed.

Workers compress chunks themselves (`compress_chunk` applies exactly HDF5's deflate filter),
and the writer stores the bytes with `write_direct_chunk`; so the compression runs in
parallel and the bytes of a shard do not depend on the number of workers. A shard is written to
a temporary name and renamed when complete: a file named `shard-*.h5` is always whole.

Letters: N samples, T frames, S slots, H = W = image side.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import zlib
from pathlib import Path

import h5py
import numpy as np

from geogen import schema
from geogen.errors import GeogenError

MANIFEST = "manifest.json"
DEFLATE_LEVEL = 2      # measured: level 2 is ~9% faster than 3 at 128 px for ~6% more bytes
CHUNK_BYTES = 1 << 18  # aim for chunks of about 256 KiB raw for the largest field
TMP_SUFFIX = ".tmp"
SHA_SUFFIX = ".sha256"  # the sidecar of a shard: its sha256 as written


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.h5"


def chunk_samples(size: int, frames: int, slots: int = schema.S) -> int:
    """Samples per HDF5 chunk: small groups, so reading one sample decompresses little."""
    largest = max(int(np.prod(schema.sample_shape(k, frames, size, slots))) * f.dtype.itemsize
                  for k, f in schema.FIELDS.items())
    return int(max(1, min(32, CHUNK_BYTES // largest)))


def compress_chunk(arr: np.ndarray, chunk_n: int, level: int = DEFLATE_LEVEL) -> bytes:
    """HDF5's deflate filter on one chunk (n <= chunk_n samples, zero-padded to chunk_n).

    No shuffle filter: the flow is exactly piecewise constant, so its raw float32 pairs repeat
    and deflate finds them; shuffling measured slower and larger here (128 px: 0.33 vs 0.46 ms
    and 1.0 vs 1.6 kB per flow field per sample).
    """
    if len(arr) < chunk_n:
        pad = np.zeros((chunk_n - len(arr),) + arr.shape[1:], arr.dtype)
        arr = np.concatenate([arr, pad])
    return zlib.compress(np.ascontiguousarray(arr).tobytes(), level)


class ShardWriter:
    """One shard, written chunk by chunk under a temporary name; `close` renames it."""

    def __init__(self, path: Path, count: int, fields: tuple[str, ...], frames: int, size: int,
                 chunk_n: int, attrs: dict, level: int = DEFLATE_LEVEL, slots: int = schema.S):
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + TMP_SUFFIX)
        self.chunk_n = chunk_n
        self.file = h5py.File(self.tmp, "w", track_order=True)
        for key, value in attrs.items():
            self.file.attrs[key] = value
        for name in fields:
            spec = schema.FIELDS[name]
            shape = schema.sample_shape(name, frames, size, slots)
            self.file.create_dataset(
                # maxshape lets a chunk hold more samples than a small shard has.
                name, shape=(count,) + shape, maxshape=(None,) + shape, dtype=spec.dtype,
                chunks=(chunk_n,) + shape,
                compression="gzip", compression_opts=level, shuffle=False,
                track_times=False)

    def write_chunk(self, start: int, name: str, data: bytes) -> None:
        """Store one compressed chunk whose first sample is local index `start`."""
        if start % self.chunk_n:
            raise ValueError(f"chunk start {start} is not a multiple of {self.chunk_n}")
        dset = self.file[name]
        dset.id.write_direct_chunk((start,) + (0,) * (dset.ndim - 1), data)

    def close(self) -> str:
        """Finish the file, give it its final name and its sidecar, return its sha256. If
        that fails (a full disk), the unfinished file is removed before the error goes on (a
        shard left without its sidecar is made again)."""
        try:
            self.file.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.abort()
            raise
        sha = file_sha256(self.path)
        write_sidecar(self.path, sha)
        return sha

    def abort(self) -> None:
        """Remove the unfinished file."""
        try:
            self.file.close()
        except Exception:  # closing can fail as writing did; the first error is the one to report
            pass
        finally:
            self.tmp.unlink(missing_ok=True)


def write_arrays(path: Path, arrays: dict[str, np.ndarray], frames: int, size: int,
                 attrs: dict) -> str:
    """Write a whole shard from in-memory arrays (N, ...); returns its sha256."""
    count = len(next(iter(arrays.values())))
    chunk_n = chunk_samples(size, frames)
    writer = ShardWriter(path, count, tuple(arrays), frames, size, chunk_n,
                         dict(attrs, count=count))
    try:
        for start in range(0, count, chunk_n):
            for name, arr in arrays.items():
                arr = np.asarray(arr, schema.FIELDS[name].dtype)
                writer.write_chunk(start, name, compress_chunk(arr[start:start + chunk_n], chunk_n))
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + SHA_SUFFIX)


def write_sidecar(path: Path, sha: str) -> None:
    """Record `sha` as the sha256 of shard `path` as written (`sha256sum -c` reads it)."""
    side = sidecar(path)
    tmp = side.with_name(side.name + TMP_SUFFIX)
    try:
        tmp.write_text(f"{sha}  {path.name}\n")
        os.replace(tmp, side)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_sidecar(path: Path) -> str | None:
    """The sha256 that shard `path` had when it was written; None without a readable sidecar
    (a folder made before they existed, or a shard cut off before its sidecar)."""
    try:
        sha = sidecar(path).read_text().split()[0]
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return sha if len(sha) == 64 else None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_json_atomic(path: Path, obj: dict) -> None:
    # The temporary's name is the writer's own: the parts of one dataset, made on several
    # machines at once, each write the same run.json (geogen.parts).
    tmp = Path(f"{path}.{socket.gethostname()}-{os.getpid()}{TMP_SUFFIX}")
    try:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_manifest(root: str | Path) -> dict:
    """The manifest of a generated folder, or a GeogenError saying why it cannot be read."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise GeogenError(f"{root}: no {MANIFEST} (not a finished geogen folder)")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise GeogenError(f"{path}: unreadable manifest ({err})") from None


def manifest_hash(root: str | Path) -> str:
    """sha256 of manifest.json: names the exact data a result was computed on."""
    read_manifest(root)
    return file_sha256(Path(root) / MANIFEST)


def shard_paths(root: str | Path, manifest: dict, split: str) -> list[tuple[Path, int]]:
    """(path, count) of each shard of a split, in index order."""
    return [(Path(root) / s["file"], int(s["count"])) for s in manifest["shards"].get(split, [])]


def open_shard(path: Path) -> h5py.File:
    """Open a shard for reading; a missing, truncated or foreign file is a GeogenError."""
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as err:
        raise GeogenError(f"{path}: cannot open shard ({err.__class__.__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else 'corrupt'})") from None


def shard_attrs(head: dict, split: str, first: int, count: int) -> dict:
    """The attributes (`schema.SHARD_ATTRS`) of a shard of the run that `head` describes: a
    manifest, or what a run writes into one (variant, seed, size, frames, generator_version,
    schema_version, config)."""
    return {"variant": head["variant"], "seed": head["seed"], "size": head["size"],
            "frames": head["frames"], "generator_version": head["generator_version"],
            "schema_version": head["schema_version"],
            "config": json.dumps(head["config"], sort_keys=True),
            "split": split, "first_index": first, "count": count}


def shard_problem(path: Path, attrs: dict, sha256: str | None = None) -> str | None:
    """Why `path` is not the whole shard with attributes `attrs` (None: it is): missing or
    unreadable, of other attributes, or of other bytes than those it was written with (its
    sidecar) or than `sha256`, where a manifest or a part recorded one. A shard that neither
    vouches for (a folder of an older geogen, cut off before its sidecar) is not whole."""
    if not path.is_file():
        return "missing"
    try:
        with open_shard(path) as f:
            other = [key for key, value in attrs.items() if _attr(f, key) != value]
    except (GeogenError, OSError, KeyError, ValueError) as err:
        return f"unreadable ({err.__class__.__name__})"
    if other:
        return f"made with other settings ({', '.join(other)} differ)"
    written, sha = read_sidecar(path), file_sha256(path)
    if written is not None and written != sha:
        return f"its bytes changed since it was written (sha256 differs from its {SHA_SUFFIX})"
    if sha256 is not None and sha256 != sha:
        return "its bytes are not those recorded for it (sha256 differs)"
    if written is None and sha256 is None:
        return f"nothing vouches for it (no {sidecar(path).name})"
    return None


def _attr(f: h5py.File, key: str):
    """Attribute `key` of an open shard as a Python value (None when absent)."""
    value = f.attrs.get(key)
    if isinstance(value, bytes):
        return value.decode()
    return value.item() if isinstance(value, np.generic) else value


def verify(root: str | Path, checksums: bool = True) -> list[str]:
    """Every mismatch between a folder and its manifest and the schema (empty: all good); a
    manifest without the entries it needs is a GeogenError."""
    root = Path(root)
    manifest = read_manifest(root)
    try:
        return _verify(root, manifest, checksums)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise GeogenError(f"{root / MANIFEST}: malformed "
                          f"({err.__class__.__name__}: {err})") from None


def _verify(root: Path, manifest: dict, checksums: bool) -> list[str]:
    problems = [f"manifest {p}" for p in schema.manifest_problems(manifest)]
    if problems:  # the values' bounds come from the slots and classes
        return problems
    size, frames = int(manifest["size"]), int(manifest["frames"])
    bounds = schema.bounds_of(manifest)
    fields = tuple(manifest.get("fields", schema.REQUIRED_FIELDS))
    problems += [f"manifest names unknown field {name!r}" for name in fields
                 if name not in schema.FIELDS]
    fields = tuple(dict.fromkeys(schema.REQUIRED_FIELDS + fields))  # required ones first
    for split in schema.SPLITS:
        want_total = int(manifest["counts"].get(split, 0))
        total = 0
        for entry in manifest["shards"].get(split, []):
            path = root / entry["file"]
            if not path.is_file():
                problems.append(f"{entry['file']}: missing")
                continue
            if checksums:
                sha, written = file_sha256(path), read_sidecar(path)
                if sha != entry["sha256"]:
                    problems.append(f"{entry['file']}: checksum mismatch")
                    continue
                if written is not None and written != sha:  # a manifest written after a change
                    problems.append(f"{entry['file']}: its bytes changed since it was written "
                                    f"(sha256 differs from its {SHA_SUFFIX})")
            attrs = shard_attrs(manifest, split, total, int(entry["count"]))
            problems += [f"{entry['file']}: {p}" for p in _check_shard(
                path, attrs, size, frames, bounds, fields)]
            total += int(entry["count"])
        if total != want_total:
            problems.append(f"{split}: {total} samples in shards, manifest says {want_total}")
    return problems


VERIFY_BYTES = 64 << 20  # raw bytes of one field that verify reads at a time


def _check_shard(path: Path, attrs: dict, size: int, frames: int, bounds: schema.Bounds,
                 fields: tuple[str, ...]) -> list[str]:
    """A shard against its manifest: its attributes, each field's shape and dtype, and every
    value (`schema.value_problem`)."""
    problems = []
    try:
        with h5py.File(path, "r") as f:
            count = int(attrs["count"])
            missing = [key for key in schema.SHARD_ATTRS if key not in f.attrs]
            problems += [f"attribute {key!r} missing" for key in missing]
            other = [key for key, value in attrs.items()
                     if key not in missing and _attr(f, key) != value]
            if other:
                problems.append(f"attributes {', '.join(other)} disagree with the manifest")
            shaped = []
            for name in fields:
                if name not in schema.FIELDS:
                    continue
                if name not in f:
                    problems.append(f"field {name!r} missing")
                    continue
                spec, dset = schema.FIELDS[name], f[name]
                want = (count,) + schema.sample_shape(name, frames, size, bounds.slots)
                if dset.shape != want or dset.dtype != spec.dtype:
                    problems.append(f"field {name!r}: {dset.dtype}{list(dset.shape)}, "
                                    f"want {spec.dtype}{list(want)}")
                else:
                    shaped.append(name)
            if shaped and count:
                f[shaped[0]][-1:]   # decompress a last chunk: a truncated file fails here
            for name in (n for n in shaped if schema.has_value_rules(n, bounds)):
                dset = f[name]
                step = max(1, VERIFY_BYTES // max(1, dset.dtype.itemsize
                                                  * int(np.prod(dset.shape[1:]))))
                for a in range(0, count, step):
                    bad = schema.value_problem(name, dset[a:a + step], bounds, a)
                    if bad:
                        problems.append(f"field {name!r} {bad}")
                        break
    except (OSError, ValueError, KeyError) as err:
        problems.append(f"unreadable ({err.__class__.__name__})")
    return problems
