"""docs/records.md: each committed record's provenance, written from the records themselves.

`flowbench records -o docs/records.md` writes it; `tests/test_records_doc.py` fails when a record
changes and the page is not written again. The page says, per record, what the record holds
(command, commit, machine, times, training, headline metrics, checkpoint, notes) and nothing
else: the history of records replaced or moved is docs/results/records-history.md. No method
is named here; the page groups whatever the records hold by dataset, method and profile.
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Callable

from benchmark.registry import Axes
from benchmark.records import load_records, record_look

REGENERATE = "flowbench records -o docs/records.md"
UNITS = ("pairs", "clips", "samples")  # what a trainer's meta counts its rows in
HEADLINE = (("amodal IoU", "amodal_iou"), ("visible IoU", "visible_iou"))


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) else "-"


def _scores(metrics: dict[str, Any]) -> str:
    """'amodal IoU 0.955 (per image 0.960); visible IoU ...': "all", fixed assignment first."""
    parts = []
    for label, key in HEADLINE:
        fixed = (metrics.get(key) or {}).get("all")
        per_image = (metrics.get(f"{key}_per_image") or {}).get("all")
        if fixed is None and per_image is None:
            continue
        parts.append(f"{label} {_fmt(fixed)}"
                     + (f" (per image {_fmt(per_image)})" if per_image is not None else ""))
    return "; ".join(parts) or "none"


def _commit(git: dict[str, Any] | None) -> str:
    git = git or {}
    commit = git.get("commit")
    if not commit:
        return "not known"
    dirty = git.get("dirty")
    state = {True: "a dirty tree", False: "a clean tree", None: "tree state not known"}[dirty]
    line = f"`{commit[:7]}` ({state}"
    if git.get("from"):
        line += f", named by {git['from']}"
    end = git.get("at_end")
    if end and end.get("commit"):
        line += f"; at its end `{end['commit'][:7]}`" + (", dirty" if end.get("dirty") else "")
    return line + ")"


def _machine(rec: dict[str, Any]) -> str:
    m = rec.get("machine") or {}
    parts = [m.get("cpu") or "CPU not known"]
    if m.get("cpu_count"):
        parts[0] += f" ({m['cpu_count']} cores)"
    if m.get("gpu"):
        parts.append(m["gpu"])
    parts.append(f"torch {m.get('torch') or 'not recorded'}")
    parts.append(f"device {rec.get('device') or m.get('device') or 'not known'}")
    return ", ".join(parts)


def _training(rec: dict[str, Any]) -> str | None:
    """What the checkpoint says of its training (`config.trained_with.meta`), where it says it."""
    meta = ((rec.get("config") or {}).get("trained_with") or {}).get("meta") or {}
    parts = []
    for unit in UNITS:
        if isinstance(meta.get(unit), int):
            seen = f"{meta[unit]:,} {unit}"
            if isinstance(meta.get(f"{unit}_total"), int):
                seen += f" from a training set of {meta[f'{unit}_total']:,}"
            parts.append(seen)
    if isinstance(meta.get("step"), int):
        parts.append(f"{meta['step']:,} steps")
    if isinstance(meta.get("train_seconds"), (int, float)):
        parts.append(f"{meta['train_seconds'] / 60:.1f} min of training")
    if isinstance(meta.get("world_size"), int):
        parts.append(f"{meta['world_size']} rank{'s' * (meta['world_size'] != 1)}")
    if meta.get("bf16"):
        parts.append("bf16")
    if meta.get("stop_reason"):
        parts.append(f"stopped by {meta['stop_reason']}")
    if meta.get("data"):
        parts.append(f"data `{meta['data']}`")
    return ", ".join(parts) or None


def _wall(wall: dict[str, Any] | None) -> str:
    wall = wall or {}
    if not isinstance(wall.get("total"), (int, float)):
        return "not recorded"
    steps = [f"{k} {wall[k] / 60:.1f}" for k in ("data", "train", "eval")
             if isinstance(wall.get(k), (int, float))]
    return f"{wall['total'] / 60:.1f} min" + (f" ({', '.join(steps)})" if steps else "")


def _notes(rec: dict[str, Any]) -> list[str]:
    notes = []
    if rec.get("checkpoint_note"):
        notes.append(rec["checkpoint_note"])
    if rec.get("checkpoint_source"):
        notes.append(f"checkpoint copied from `{rec['checkpoint_source']}`")
    old = rec.get("rescored_from")
    if isinstance(old, dict):
        commit = ((old.get("git") or {}).get("commit") or old.get("commit") or "")[:7]
        notes.append(f"re-scored; `rescored_from` keeps {old.get('what') or 'what it replaced'}"
                     + (f" (its command `{old['command']}`" if old.get("command") else "")
                     + (f", commit `{commit}`" if commit and old.get("command") else "")
                     + (")" if old.get("command") else ""))
    return notes


def _record_lines(rec: dict[str, Any], path: str) -> list[str]:
    lines = [f"#### `{path}`", ""]
    seed = f"seed {rec['seed']}" + (f" (run seed {rec['run_seed']})" if "run_seed" in rec else "")
    tag = Axes(**rec["variant"]).tag() if rec.get("variant") else ""
    lines.append(f"- {seed}" + (f", overrides {tag}" if tag else ""))
    look = record_look(rec)
    if look is not None:  # Geo+: which textures it was scored on (the tables' rows differ)
        unrecorded = "look" not in (rec.get("data") or {})
        lines.append(f"- data look: {look}" + (" (not recorded: made before geogen recorded "
                                                "looks)" if unrecorded else ""))
    lines.append(f"- command: `{rec.get('command') or 'not recorded'}`")
    lines.append(f"- commit: {_commit(rec.get('git'))}")
    lines.append(f"- machine: {_machine(rec)}")
    lines.append(f"- started {rec.get('started_at') or '-'}, finished {rec.get('finished_at') or '-'}")
    training = _training(rec)
    if training:
        lines.append(f"- training: {training}")
    lines.append(f"- wall: {_wall(rec.get('wall_s'))}")
    masks = "" if rec.get("amodal", True) else " (visible-only masks)"
    lines.append(f"- scores{masks}: {_scores(rec['metrics'])}")
    groups = rec["metrics"].get("groups")
    if isinstance(groups, dict):
        lines.append(f"- scores on the groups: {_scores(groups)}")
    ckpt = rec.get("checkpoint")
    if ckpt:
        sha = rec.get("checkpoint_sha256")
        lines.append(f"- checkpoint: `{ckpt}`" + (f", sha256 `{sha}`" if sha else ""))
    lines += [f"- note: {n}" for n in _notes(rec)]
    return lines + [""]


def records_text(root: Path, warn: Callable[[str], None] = lambda _: None) -> str:
    """The page for the records under `root` (benchmark.records.load_records: the records the
    tables read), grouped by dataset, method and profile; each skipped file goes to `warn` and
    into the page's last section."""
    records, problems = load_records([Path(root)])
    shown = PurePosixPath(Path(root).as_posix())

    def key(rec):
        tag = Axes(**rec["variant"]).tag() if rec.get("variant") else ""
        return rec["dataset"], rec["method"], rec["profile"], tag, rec["seed"]

    out = [f"# The records under `{shown}`", "",
           f"Written by `{REGENERATE}` from the records themselves; do not edit",
           "it by hand (a test checks that it is what the command writes). A record's fields are",
           "described in `docs/benchmark.md`, \"Records\"; which record or checkpoint replaced which,",
           "and the stories of the runs: `docs/results/records-history.md`. Times are UTC; the scores",
           "are \"all\" with the fixed assignment and, in brackets, per image.", ""]
    group = None
    for rec in sorted(records, key=key):
        if rec["dataset"] != (group or ("",))[0]:
            out += [f"## {rec['dataset']}", ""]
        if group != (rec["dataset"], rec["method"], rec["profile"]):
            group = (rec["dataset"], rec["method"], rec["profile"])
            out += [f"### {rec['method']}, {rec['profile']}", ""]
        path = Path(rec["_path"]).relative_to(Path(root)).as_posix()
        out += _record_lines(rec, path)
    if problems:
        out += ["## Files the tables skip", ""] + [f"- {p}" for p in problems] + [""]
        for p in problems:
            warn(f"skipped: {p}")
    return "\n".join(out).rstrip("\n") + "\n"
