"""Committed checkpoints and the records they made, each pointing at the other.

A committed checkpoint `checkpoints/<name>.pt` has a provenance file `checkpoints/<name>.json`
whose `sha256` is the checkpoint's and whose `records` list names each record it made by its
repository path and the record file's sha256. Each of those records names the checkpoint by
path (`checkpoint`) and sha256 (`checkpoint_sha256`). A committed record whose checkpoint is not
in the repository has `checkpoint_sha256` null and says why in `checkpoint_note`.

`publish` makes such a pair from a run: it copies the record's checkpoint (and its training
log, when the run folder has one) into checkpoints/, rewrites the record's checkpoint field and
writes the provenance; every file is written to a temporary name first and renamed at the end.
`check_pairs` lists every way the committed pairs fail to point at each other.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from benchmark import records
from benchmark.errors import BenchmarkError

CHECKPOINTS = Path("checkpoints")


def _relative(path: Path, what: str) -> str:
    """A path inside the repository (the working directory), as the repository names it."""
    try:
        return Path(os.path.relpath(Path(path).resolve(), Path.cwd().resolve())).as_posix()
    except ValueError:
        rel = ".."
    else:
        if not rel.startswith(".."):
            return rel
    raise BenchmarkError(f"{what} {path} is outside this repository ({Path.cwd()})")


def _sha_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _staged(final: Path) -> Path:
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=final.name + ".", suffix=".tmp")
    os.close(fd)
    return Path(tmp)


def publish(record: Path, dest: Path, force: bool = False, command: str | None = None) -> dict:
    """Copy a record's checkpoint to `dest` (under checkpoints/), write its provenance beside it
    and point the record at it. A checkpoint already at `dest` with the same bytes is linked
    (the record is added to its provenance); other bytes there need `force`.
    Returns {"checkpoint", "provenance", "record", "copied"}."""
    rec_rel, dest_rel = _relative(record, "record"), _relative(dest, "checkpoint")
    if Path(dest).suffix != ".pt" or Path(dest_rel).parent != CHECKPOINTS:
        raise BenchmarkError(f"--as must name checkpoints/<name>.pt, got {dest}")
    rec = records.read_record(Path(record))
    if rec["partial"]:
        raise BenchmarkError(f"{record} is a partial evaluation; publish a full record")
    src = Path(rec.get("checkpoint") or "")
    if not rec.get("checkpoint") or not src.is_file():
        raise BenchmarkError(f"{record}: its checkpoint {rec.get('checkpoint')} is not on this "
                             f"machine")
    sha = records.file_sha256(src)
    if rec["checkpoint_sha256"] and rec["checkpoint_sha256"] != sha:
        raise BenchmarkError(f"{src} changed since {record} was written (sha256 differs)")
    _check_checkpoint_kind(rec, record, src)
    dest, prov_path = Path(dest), Path(dest).with_suffix(".json")
    link = dest.is_file() and records.file_sha256(dest) == sha
    if dest.exists() and not link and not force:
        raise BenchmarkError(f"{dest} exists and holds another checkpoint; --force replaces it")
    log = src.parent / "log.csv"
    log_dest = dest.with_suffix(".log.csv") if not link and log.is_file() else None

    new_rec = {k: v for k, v in rec.items() if not k.startswith("_")}
    new_rec.update(checkpoint=dest_rel, checkpoint_sha256=sha)
    new_rec.pop("checkpoint_note", None)
    if not link or rec.get("checkpoint") != dest_rel:
        new_rec.setdefault("checkpoint_source", rec.get("checkpoint"))
    rec_text = records.json_text(new_rec)
    prov = json.loads(prov_path.read_text()) if link and prov_path.is_file() else {
        "what": f"the checkpoint of {rec['method']} on {rec['dataset']} ({rec['profile']} "
                f"profile, seed {rec['seed']}), copied from its run",
        "source": rec.get("checkpoint"), "sha256": sha, "config": rec.get("config"),
        "command": rec.get("command"), "git": rec.get("git"), "machine": rec.get("machine"),
        "training_log": log_dest.as_posix() if log_dest else None, "records": []}
    prov["records"] = [e for e in prov.get("records", []) if e["path"] != rec_rel]
    prov["records"].append({"path": rec_rel, "sha256": _sha_text(rec_text)})
    prov["published_with"] = command or records.command_line()

    dest.parent.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[Path, Path]] = []
    try:
        if not link:
            staged.append((_staged(dest), dest))
            shutil.copyfile(src, staged[-1][0])
            if records.file_sha256(staged[-1][0]) != sha:
                raise BenchmarkError(f"copying {src} gave other bytes; nothing was published")
        if log_dest is not None:
            staged.append((_staged(log_dest), log_dest))
            shutil.copyfile(log, staged[-1][0])
        for text, final in ((rec_text, Path(record)), (records.json_text(prov), prov_path)):
            staged.append((_staged(final), final))
            staged[-1][0].write_text(text)
        for tmp, _ in staged:
            os.chmod(tmp, records.public_mode())
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, final in staged:  # the provenance, which names the others, goes last
        os.replace(tmp, final)
    return {"checkpoint": dest, "provenance": prov_path, "record": Path(record),
            "copied": not link}


def _check_checkpoint_kind(rec: dict, record: Path, src: Path) -> None:
    """The record's method loads the checkpoint, and its meta names the record's dataset as its
    training data (where it names any): a checkpoint filed under another method's or dataset's
    record would be published as that one's."""
    from benchmark.registry import get_method, load_methods
    from benchmark.runner import trained_variant
    method, dataset = rec["method"], rec["dataset"]
    try:
        loaded = get_method(method).load(src)
    except BenchmarkError:
        other = next((name for name, m in load_methods().items()
                      if name != method and _loads(m, src)), None)
        what = f"a {other} checkpoint" if other else "no checkpoint any registered method loads"
        raise BenchmarkError(f"{record} is a {method} record but its checkpoint {src} is {what}; "
                             f"nothing was published") from None
    trained = trained_variant((loaded.trained_with or {}).get("meta") or {})
    if trained is not None and trained != dataset:
        raise BenchmarkError(f"{record} is a {dataset} record but its checkpoint {src} was "
                             f"trained on {trained} data; nothing was published")


def _loads(method, path: Path) -> bool:
    try:
        method.load(path)
    except BenchmarkError:
        return False
    return True


def check_pairs(checkpoints: Path = CHECKPOINTS,
                committed: Path = records.COMMITTED) -> list[str]:
    """Every way the committed checkpoints and records fail to point at each other (paths
    relative to the working directory, which is the repository root)."""
    problems = []
    listed: set[tuple[str, str]] = set()
    for prov_path in sorted(checkpoints.glob("*.json")):
        prov = json.loads(prov_path.read_text())
        pt = prov_path.with_suffix(".pt")
        if not pt.is_file() or records.file_sha256(pt) != prov.get("sha256"):
            problems.append(f"{prov_path}: {pt} is missing or not the sha256 it names")
            continue
        entries = prov.get("records")
        if not isinstance(entries, list) or (not entries and not prov.get("records_note")):
            problems.append(f"{prov_path}: names no records (and no records_note saying why)")
            continue
        for e in entries:
            path = Path(e.get("path", ""))
            if not path.is_file() or records.file_sha256(path) != e.get("sha256"):
                problems.append(f"{prov_path}: record {path} is missing or not the sha256 named")
                continue
            rec = records.read_record(path)
            if (rec.get("checkpoint"), rec["checkpoint_sha256"]) != (pt.as_posix(), prov["sha256"]):
                problems.append(f"{path} does not name {pt} and its sha256")
            listed.add((path.as_posix(), pt.as_posix()))
    for path in sorted(committed.rglob("*.json")):
        rec = records.read_record(path)
        ckpt, sha = rec.get("checkpoint"), rec["checkpoint_sha256"]
        if sha is None:
            if not rec.get("checkpoint_note"):
                problems.append(f"{path}: no checkpoint sha256 and no checkpoint_note saying why")
            elif ckpt and Path(ckpt).is_relative_to(checkpoints):
                # only the repository's own folder counts: a run folder present on one machine
                # says nothing about what a clone holds
                problems.append(f"{path}: names {ckpt} in {checkpoints} but no sha256 for it")
        elif (path.as_posix(), ckpt) not in listed:
            problems.append(f"{path}: names {ckpt}, whose provenance does not list it")
    return problems
