"""Result records: one JSON file per method x dataset x profile x variant x seed.

A record holds the metrics, the full config, the data's manifest hash, the git commit,
the machine, the device, wall times, the exact command and timestamps. Files are
written to a temporary name and renamed, so a half-written record never looks
complete. Records of an older `record_version` are reported, never read silently.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError
from benchmark.registry import Axes

RECORD_VERSION = 1
REQUIRED_KEYS = ("record_version", "method", "dataset", "profile", "seed", "axes", "metrics")


def record_name(method: str, dataset: str, profile: str, seed: int, variant: Axes) -> str:
    """File name of a record; the variant tag only appears for ablation runs."""
    tag = variant.tag()
    parts = [method, dataset.replace("+", "plus"), profile] + ([tag] if tag else []) + [f"seed{seed}"]
    return "_".join(parts) + ".json"


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


def machine_info(device: str) -> dict[str, Any]:
    """CPU model, thread counts, GPU name (if torch sees one) and the device used."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cpu_count": os.cpu_count(), "platform": platform.platform(),
                            "python": platform.python_version(), "device": device, "gpu": None}
    if "torch" in sys.modules:  # only report what the run itself loaded
        torch = sys.modules["torch"]
        info["torch"] = torch.__version__
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
                command: str | None = None) -> dict[str, Any]:
    """Assemble a record (plain JSON data); `device` is as requested, "auto" is resolved."""
    machine = machine_info(device)
    return {
        "record_version": RECORD_VERSION,
        "method": method, "dataset": dataset, "profile": profile,
        "seed": seed, "run_seed": run_seed,
        "axes": asdict(axes), "variant": asdict(variant),
        "metrics": metrics, "config": config, "data": data, "checkpoint": checkpoint,
        "git": git_state(), "machine": machine, "device": machine["device"],
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
    """Write text to a temporary file beside `path`, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, public_mode())  # mkstemp makes owner-only files; records are shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, payload: Any) -> Path:
    return write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def write_record(results: Path, record: dict[str, Any]) -> Path:
    variant = Axes(**record["variant"])
    name = record_name(record["method"], record["dataset"], record["profile"], record["seed"], variant)
    return write_json_atomic(results / name, record)


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
    return rec


def load_records(results: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """All usable records under `results` and one message per unusable file.

    Raises BenchmarkError when the folder is missing or holds no usable record.
    """
    if not results.is_dir():
        raise BenchmarkError(f"results folder {results} does not exist; "
                             f"`flowbench run flowcaps` writes records there")
    records, problems = [], []
    for path in sorted(results.glob("*.json")):
        try:
            records.append(read_record(path))
        except BenchmarkError as err:
            problems.append(str(err))
    if not records:
        detail = f" ({len(problems)} unusable: {problems[0]})" if problems else ""
        raise BenchmarkError(f"no usable result records in {results}{detail}; "
                             f"run `flowbench run flowcaps` first")
    return records, problems
