"""One dataset made by several machines: `geogen make --part I/N` makes part I's shards, and
`geogen merge OUT` writes the manifest once every part is there.

A sample is a pure function of (seed, split, index) and a shard of its index range, so the
parts share nothing but the output folder (a shared file system) and its run.json. Part I of N
takes the shards at positions I-1, I-1+N, ... of the plan (train, then val, then test): every
part gets about as many shards of each split. A finished part writes OUT/parts/part-I-of-N.json
(its shards and their sha256) and no manifest; the merge checks the markers against the plan
and the shards against their checksums, writes the manifest a one-part run writes (the same
function makes both) and removes OUT/parts, so the folder is byte for byte a one-part run's.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from geogen import shards
from geogen.errors import GeogenError

PARTS_DIR = "parts"  # under OUT: the finished parts' markers, removed by the merge


@dataclass(frozen=True)
class Part:
    index: int  # 1-based, as the command line writes it
    count: int

    def takes(self, position: int) -> bool:
        """Whether the shard at `position` of the plan is this part's."""
        return position % self.count == self.index - 1

    def marker(self, root: Path) -> Path:
        return root / PARTS_DIR / f"part-{self.index}-of-{self.count}.json"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_part(text: str) -> Part:
    """'I/N' with 1 <= I <= N, or a one-line GeogenError."""
    try:
        i, n = (int(s) for s in text.split("/"))
    except ValueError:
        i = n = 0
    if not 1 <= i <= n:
        raise GeogenError(f"--part must be I/N with 1 <= I <= N (e.g. 1/4), got {text!r}")
    return Part(i, n)


def check_out(root: Path, part: Part, force: bool) -> None:
    """What a part refuses of OUT, in one line: --force (it would delete the other parts'
    shards) and a dataset already finished."""
    if force:
        raise GeogenError("--force with --part would delete the other parts' shards; empty the "
                          "folder first (or make the dataset whole, without --part)")
    if (root / shards.MANIFEST).is_file():
        raise GeogenError(f"{root}: already holds this dataset, finished (its manifest is "
                          f"written); nothing for part {part} to make")


def own_shards(plan: list, part: Part | None) -> list:
    """The entries of the shard plan that `part` makes (all of them without a part)."""
    return plan if part is None else [s for j, s in enumerate(plan) if part.takes(j)]


def write_marker(root: Path, part: Part, config_content: dict, entries: list[dict],
                 sources: dict | None) -> Path:
    """Part `part` is finished: its shards (file, first_index, count, sha256) and the image
    sources it read (the merge puts them in the manifest; every part reads the same)."""
    path = part.marker(root)
    path.parent.mkdir(exist_ok=True)
    shards.write_json_atomic(path, {"part": part.index, "parts": part.count,
                                    "config": config_content, "shards": entries,
                                    "sources": sources})
    return path


def read_markers(root: Path, content: dict, plan: list) -> tuple[dict[tuple[str, int], str],
                                                                 dict | None]:
    """Every part's marker checked against run.json and the plan: the sha256 each one recorded
    by (split, shard index), and the image sources; a one-line GeogenError naming what is
    missing or does not fit."""
    found = sorted((root / PARTS_DIR).glob("part-*-of-*.json"))
    if not found:
        raise GeogenError(f"{root}: no finished part (no {PARTS_DIR}/part-I-of-N.json); make "
                          f"the parts with geogen make ... --part I/N first")
    markers = []
    for path in found:
        try:
            markers.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            raise GeogenError(f"{path}: unreadable part marker; make that part again") from None
    counts = {m.get("parts") for m in markers}
    if len(counts) != 1:
        raise GeogenError(f"{root}: holds parts of different splits ({', '.join(p.name for p in found)}); "
                          f"remove the folder {root / PARTS_DIR} of the wrong ones and make those again")
    n = counts.pop()
    missing = sorted(set(range(1, n + 1)) - {m.get("part") for m in markers})
    if missing:
        raise GeogenError(f"{root}: part(s) {', '.join(f'{i}/{n}' for i in missing)} not "
                          f"finished yet; run geogen make with the same settings and --part I/{n} "
                          f"for each, then merge")
    sha: dict[tuple[str, int], str] = {}
    for m in markers:
        if m.get("config") != content:
            raise GeogenError(f"{root}: part {m.get('part')}/{n} was made with other settings "
                              f"than {root / 'run.json'}; make it again")
        for e in m.get("shards", []):
            sha[(e["file"].split("/")[0], index_of(e["file"]))] = e["sha256"]
    want = {(split, k) for split, k, _, _ in plan}
    if set(sha) != want:
        raise GeogenError(f"{root}: the parts' shards ({len(sha)}) are not the plan's "
                          f"({len(want)}); make the parts again with the same settings")
    return sha, markers[0].get("sources")


def recorded_shards(root: Path, content: dict) -> dict[tuple[str, int], str]:
    """The sha256 that the finished parts of settings `content` recorded for their shards, by
    (split, shard index); unreadable markers are passed over (the merge names them)."""
    sha = {}
    for path in sorted((root / PARTS_DIR).glob("part-*-of-*.json")):
        try:
            marker = json.loads(path.read_text())
            if marker.get("config") == content:
                sha.update({(e["file"].split("/")[0], index_of(e["file"])): e["sha256"]
                            for e in marker.get("shards", [])})
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            continue
    return sha


def index_of(file: str) -> int:
    """The shard index of a manifest's or marker's file entry, `split/shard-NNNNN.h5`."""
    return int(Path(file).stem.split("-")[1])


def clear_markers(root: Path) -> None:
    shutil.rmtree(root / PARTS_DIR, ignore_errors=True)
