"""Result records: one JSON file per method x dataset x profile x variant x seed.

A record holds the metrics, the full config, the data's manifest hash, the checkpoint (path and
sha256), the git commit the run started from, the machine, the device, wall times, the exact command and timestamps.
Records live in a tree, `<root>/<dataset>/<method>/<profile>/<stem>.json` (`record_path`); the
committed ones under `results/records`, a user's own under `runs/records` (git-ignored). The
tables select by the fields inside a record, never by its place in the tree.

Files are written to a temporary name and renamed, so a half-written record never looks
complete. Records of an older `record_version` are reported, never read silently. Fields added
since version 1 without a bump (each read with the default that every earlier record had):
`partial` (False), `uses_ground_truth` ([]), `amodal` (True), `checkpoint_sha256` (None). The
tables read only records whose `metrics.segmentation_rule` is benchmark.metrics'
SEGMENTATION_RULE (absent: 1, the rule before it) and whose data geogen would make now (its
edge subsample count, `data.supersample`); `load_records` names the others.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmark.datasets import current_supersample
from benchmark.errors import BenchmarkError
from benchmark.metrics import SEGMENTATION_RULE
from benchmark.profiles import dataset_folder
from benchmark.registry import Axes

RECORD_VERSION = 1
REQUIRED_KEYS = ("record_version", "method", "dataset", "profile", "seed", "axes", "metrics")
# Fields added after version 1's first records, with the value every earlier record had.
DEFAULTS = {"partial": False, "uses_ground_truth": [], "amodal": True, "checkpoint_sha256": None,
            "extras": {}}
TABLE_MOTION = "translation"  # geogen's default motion, the paper's: what the tables compare
COMMITTED = Path("results") / "records"  # the records the repository's tables are made from
LOCAL = Path("runs") / "records"  # where `flowbench run` writes unless told otherwise


def record_stem(seed: int, variant: Axes, partial_pairs: int | None = None) -> str:
    """'seed0', 'K4-s11-seed0'; a partial evaluation of N test pairs ends in '-test<N>'."""
    tag = variant.tag()
    stem = (f"{tag}-" if tag else "") + f"seed{seed}"
    return stem + (f"-test{partial_pairs}" if partial_pairs is not None else "")


def record_path(results: Path, method: str, dataset: str, profile: str, seed: int,
                variant: Axes, partial_pairs: int | None = None) -> Path:
    """<results>/<dataset>/<method>/<profile>/<stem>.json."""
    return (Path(results) / dataset_folder(dataset) / method / profile
            / f"{record_stem(seed, variant, partial_pairs)}.json")


FAILED_SUFFIX = ".failed.json"  # beside a record's place: why the job that was to write it failed


def failure_path(target: Path) -> Path:
    """Where the note of a failed job for the record `target` goes."""
    return Path(target).with_name(Path(target).name[:-len(".json")] + FAILED_SUFFIX)


def write_failure(target: Path, reason: str, job: str) -> Path:
    """A cluster job that was to write `target` failed: its reason, which the tables' skip list
    shows until a later run writes the record."""
    return write_json_atomic(failure_path(target), {"failed": {"record": str(target),
                                                               "job": job, "reason": reason,
                                                               "at": now()}})


def _failure_line(path: Path) -> str:
    try:
        note = json.loads(path.read_text())["failed"]
        return f"{note['record']}: job {note['job']} failed: {note['reason']}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"{path}: an unreadable note of a failed job"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


SOURCE_COMMIT_ENV = "FLOWBENCH_SOURCE_COMMIT"


def git_state(root: Path | None = None) -> dict[str, Any]:
    """The commit and whether the tree had changes; None values outside a git checkout."""
    root = root or Path(__file__).resolve().parent.parent

    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = run("rev-parse", "HEAD")
    status = run("status", "--porcelain", "--untracked-files=no")
    if commit is None and os.environ.get(SOURCE_COMMIT_ENV):
        # a copy of a checkout without its .git (e.g. sent to another machine): the sender
        # names the commit it copied; whether the copy matched it is not known here
        return {"commit": os.environ[SOURCE_COMMIT_ENV], "dirty": None, "from": SOURCE_COMMIT_ENV}
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # what decides torch's CPU kernels
ISA_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")  # set, they restrict torch's kernels


def cpu_flags(cpuinfo: str | None = None) -> dict[str, bool]:
    """Which of CPU_FLAGS the CPU reports (/proc/cpuinfo's first flags line)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    have = set(line.split(":", 1)[-1].split())
    return {f: f in have for f in CPU_FLAGS}


def machine_info(device: str) -> dict[str, Any]:
    """CPU model and flags, the variables that restrict torch's CPU kernels and the kernels it
    picked, thread counts, GPU name (if torch sees one) and the device used."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cpu_flags": cpu_flags(), "cpu_count": os.cpu_count(),
                            "platform": platform.platform(), "python": platform.python_version(),
                            "device": device, "gpu": None,
                            **{name: os.environ.get(name) for name in ISA_ENV}}
    if "torch" in sys.modules:  # only report what the run itself loaded
        torch = sys.modules["torch"]
        info["torch"] = torch.__version__
        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
        if device == "auto":  # what "auto" picked, by flowcaps' rule (cuda when available)
            info["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    return info


def command_line() -> str:
    """The command as typed (program name without its directory)."""
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])


def make_record(*, method: str, dataset: str, profile: str, seed: int, run_seed: int,
                axes: Axes, variant: Axes, metrics: dict, config: dict, data: dict,
                checkpoint: str | None, device: str, wall: dict, started_at: str,
                command: str | None = None, checkpoint_sha256: str | None = None,
                uses_ground_truth: tuple[str, ...] = (), amodal: bool = True,
                test_limit: int | None = None, partial: bool | None = None,
                git: dict[str, Any] | None = None,
                extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """Assemble a record (plain JSON data); `device` is as requested, "auto" is resolved.

    `git` is the checkout's state when the run started (`git_state()`, read now if None): the
    code that ran. When the checkout changed while it ran, the record says so and names the state
    at its end (`git.at_end`), so `git diff` shows what changed.

    A `partial` record scored fewer test pairs than its profile's test split (by default: any
    run with a test limit); the tables skip it. `extras`: the method's own findings
    (`Method.record_extras`), stored as given.
    """
    machine = machine_info(device)
    end = git_state()
    if git is None:
        git = end
    elif end != git:
        git = {**git, "at_end": end}
    return {
        "record_version": RECORD_VERSION,
        "method": method, "dataset": dataset, "profile": profile,
        "seed": seed, "run_seed": run_seed,
        "axes": asdict(axes), "variant": asdict(variant),
        "uses_ground_truth": list(uses_ground_truth), "amodal": amodal,
        "partial": test_limit is not None if partial is None else partial,
        "test_limit": test_limit,
        "metrics": metrics, "extras": extras or {}, "config": config, "data": data,
        "checkpoint": checkpoint,
        "checkpoint_sha256": checkpoint_sha256,
        "git": git, "machine": machine, "device": machine["device"],
        "device_requested": device,
        "wall_s": wall, "command": command or command_line(),
        "started_at": started_at, "finished_at": now(),
    }


def public_mode() -> int:
    """The mode a plain open() would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_text_atomic(path: Path, text: str) -> Path:
    """Write text to a temporary file beside `path`, then rename it into place; a failure (a
    full disk) leaves the file there before and no temporary one, and is one line."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    except OSError as err:
        raise BenchmarkError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, public_mode())  # mkstemp makes owner-only files; records are shared
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise BenchmarkError(f"cannot write {path}: {err.strerror or err}") from None
        raise
    return path


def json_text(payload: Any) -> str:
    """How records and provenance files are written (sorted keys, so diffs stay small)."""
    return json.dumps(payload, indent=2, sort_keys=True) + "\n"


def write_json_atomic(path: Path, payload: Any) -> Path:
    return write_text_atomic(path, json_text(payload))


def write_record(results: Path, record: dict[str, Any], force: bool = False) -> Path:
    """Write a record at its place in the tree under `results`; an existing record is replaced
    only with `force` (BenchmarkError otherwise)."""
    partial = record["metrics"].get("n_test", record.get("test_limit")) if record.get("partial") \
        else None
    path = record_path(results, record["method"], record["dataset"], record["profile"],
                       record["seed"], Axes(**record["variant"]), partial)
    if path.exists() and not force:
        raise BenchmarkError(f"record {path} exists; --force replaces it")
    written = write_json_atomic(path, {k: v for k, v in record.items() if not k.startswith("_")})
    failure_path(path).unlink(missing_ok=True)  # an earlier job's failure is mended
    return written


def read_record(path: Path) -> dict[str, Any]:
    """One record, checked; BenchmarkError for unreadable, foreign or older records."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise BenchmarkError(f"{path}: not a readable result record ({err})") from None
    if not isinstance(rec, dict) or "record_version" not in rec:
        raise BenchmarkError(f"{path}: not a flowbench result record (no record_version)")
    version = rec["record_version"]
    if version != RECORD_VERSION:
        age = "an older" if isinstance(version, int) and version < RECORD_VERSION else "an unknown"
        raise BenchmarkError(
            f"{path}: {age} record_version {version} (this flowbench reads {RECORD_VERSION}); "
            f"re-run the command stored in it to refresh it")
    missing = [k for k in REQUIRED_KEYS if k not in rec]
    if missing:
        raise BenchmarkError(f"{path}: record lacks {missing}")
    problem = schema_problem(rec)
    if problem:
        raise BenchmarkError(f"{path}: {problem}; not a table record")
    for key, value in DEFAULTS.items():
        rec.setdefault(key, value)
    return rec


def schema_problem(rec: dict[str, Any]) -> str | None:
    """What makes a record unreadable by the tables (the first thing found), or None: the kinds
    of its keys, a method and dataset this flowbench knows, and metrics that are finite numbers
    (a NaN would print as "nan", a string would end the tables in a traceback)."""
    from benchmark.registry import load_methods
    from geogen.schema import VARIANTS
    kinds = {"method": str, "dataset": str, "profile": str, "seed": int, "axes": dict,
             "metrics": dict, "variant": (dict, type(None)), "data": (dict, type(None)),
             "partial": bool}
    for key, kind in kinds.items():
        if key in rec and (not isinstance(rec[key], kind) or isinstance(rec[key], bool)
                           and kind is int):
            return f"{key} is {type(rec[key]).__name__} {rec[key]!r}"
    if rec["method"] not in load_methods():
        return f"method {rec['method']!r} is not one this flowbench knows"
    if rec["dataset"] not in VARIANTS:
        return f"dataset {rec['dataset']!r} is not one of {', '.join(VARIANTS)}"
    return _metric_problem(rec["metrics"], "metrics")


def _metric_problem(value: Any, where: str) -> str | None:
    """A metric's leaf that is not a finite number (strings, booleans and None are labels)."""
    if isinstance(value, dict):
        for k, v in value.items():
            problem = _metric_problem(v, f"{where}.{k}")
            if problem:
                return problem
        return None
    if isinstance(value, list):
        return next((p for i, v in enumerate(value) if (p := _metric_problem(v, f"{where}[{i}]"))),
                    None)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} is {value}"
    if where.count(".") >= 2 and "_iou" in where and not isinstance(value, (int, float)):
        return f"{where} is {value!r}, not a number"
    return None


def record_look(rec: dict[str, Any]) -> str | None:
    """The look of the data a record scored (geogen.schema.LOOKS); None for a dataset without
    textures. A photo variant's record without `data.look` was made before looks were
    recorded, on what is now the camouflage look."""
    from geogen.schema import PHOTO_VARIANTS, UNRECORDED_LOOK
    if rec.get("dataset") not in PHOTO_VARIANTS:
        return None
    return (rec.get("data") or {}).get("look") or UNRECORDED_LOOK


def identity(rec: dict[str, Any]) -> tuple:
    """What makes two records the same run: a later root's record shadows an earlier one's."""
    variant = tuple(sorted((rec.get("variant") or {}).items()))
    return (rec["dataset"], rec["method"], rec["profile"], variant, rec["seed"],
            (rec.get("data") or {}).get("supersample"), record_look(rec))


def load_records(roots: Path | list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every usable full record in the trees under `roots` and one message per file skipped.

    Each record gains `_path` (its file) and `_local` (True unless it is under COMMITTED).
    Partial evaluations, records scored under an older segmentation rule and records of data
    made with another edge subsample count (the former 4 x 4) are skipped (and named). Where two roots of the same kind (committed,
    or a user's) hold the same run (`identity`), the later root's record is used; a user's run
    never hides a committed one (the tables show the two apart). Roots that do not exist are
    passed over; BenchmarkError when one is a file, none exists or none holds a usable record.
    """
    roots = [Path(r) for r in ([roots] if isinstance(roots, (str, Path)) else roots)]
    for root in roots:
        if root.exists() and not root.is_dir():
            raise BenchmarkError(f"{root} is a file, not a folder of records: --results takes "
                                 f"the folder the record files are under")
    present = [r for r in roots if r.is_dir()]
    if not present:
        raise BenchmarkError(f"no results folder: {', '.join(map(str, roots))} "
                             f"{'does' if len(roots) == 1 else 'do'} not exist; "
                             f"`flowbench run flowcaps` writes records")
    by_run: dict[tuple, dict[str, Any]] = {}
    problems = []
    for root in present:
        local = root.resolve() != COMMITTED.resolve()
        for path in sorted(root.rglob("*.json")):
            if path.name.endswith(FAILED_SUFFIX):
                problems.append(_failure_line(path))
                continue
            try:
                rec = read_record(path)
            except BenchmarkError as err:
                problems.append(str(err))
                continue
            if rec["partial"]:
                problems.append(f"{path}: a partial evaluation ({rec['metrics'].get('n_test')} "
                                f"test pairs), not a table record")
                continue
            rule = rec["metrics"].get("segmentation_rule", 1)
            if rule != SEGMENTATION_RULE:
                problems.append(f"{path}: scored under segmentation rule {rule} "
                                f"(benchmark.metrics; the tables read rule {SEGMENTATION_RULE}); "
                                f"`flowbench run` with its checkpoint scores it again")
                continue
            made = (rec.get("data") or {}).get("supersample")  # None: imported data
            if made is not None and made != current_supersample():
                problems.append(f"{path}: scored on data of {made} x {made} edge subsamples "
                                f"(geogen makes {current_supersample()} x "
                                f"{current_supersample()} now), not a table record")
                continue
            motion = (rec.get("data") or {}).get("motion")  # absent in older records: the default
            if motion not in (None, TABLE_MOTION):
                problems.append(f"{path}: scored on data of {motion} motion (the tables read "
                                f"geogen's default, {TABLE_MOTION}), not a table record")
                continue
            by_run[(local, identity(rec))] = {**rec, "_path": str(path), "_local": local}
    records = list(by_run.values())
    if not records:
        detail = f" ({len(problems)} unusable: {problems[0]})" if problems else ""
        raise BenchmarkError(f"no usable result records in {', '.join(map(str, present))}"
                             f"{detail}; run `flowbench run flowcaps` first")
    return records, problems
