"""Compare two fingerprints written by equivalence.py: `compare.py BEFORE_DIR AFTER_DIR`.

One line per item: "same", or what differs. Exit status 0 when everything is the same, 1 when
anything differs, 2 on bad input.

Items (summary.json): the same items must be there with the same status and the same log files;
every metric must be equal at 3 decimals (both sides are already rounded so).
Logs (DIR/logs/*.csv): every column of BEFORE but the timing ones (seconds, *_per_s, ...) must
be in AFTER with the same values row by row; AFTER may order its columns otherwise or add some
(listed, not a difference). Two values are equal at the precision of the coarser string: each
string's last written digit gives it a unit (0.0012345 -> 1e-7, 8.23e-05 -> 1e-7, 288 -> 1), and
the two numbers must agree to within half of the coarser unit. Rounding the finer value to the
coarser's digits and requiring equality is the same test, except that this one also accepts a
value that sits right at a rounding boundary (x.xxx5 written once as ...4999 and once as ...5).
"""
from __future__ import annotations

import csv
import json
import math
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

# Columns that measure time, not behaviour.
TIMING = {"seconds", "train_seconds", "time", "wall", "wall_s", "elapsed"}


def is_timing(column: str) -> bool:
    return column in TIMING or column.endswith("_per_s") or column.endswith("_seconds")


def unit(text: str) -> Decimal | None:
    """The value of one unit in the last written digit of a number string; None for
    non-finite or non-numbers."""
    try:
        d = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    return Decimal(1).scaleb(d.as_tuple().exponent)


def values_equal(a: str, b: str) -> tuple[bool, float]:
    """(equal at the coarser precision, relative difference)."""
    a, b = a.strip(), b.strip()
    if a == b:
        return True, 0.0
    if not a or not b:
        return False, math.inf
    ua, ub = unit(a), unit(b)
    if ua is None or ub is None:  # nan, inf or text: only the same string is equal
        try:
            fa, fb = float(a), float(b)
        except ValueError:
            return False, math.inf
        return (math.isnan(fa) and math.isnan(fb)) or fa == fb, math.inf
    da, db = Decimal(a), Decimal(b)
    diff = abs(da - db)
    scale = max(abs(da), abs(db))
    rel = float(diff / scale) if scale else 0.0
    return diff <= max(ua, ub) / 2, rel


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def compare_log(before: Path, after: Path) -> tuple[bool, str]:
    cols_b, rows_b = read_csv(before)
    cols_a, rows_a = read_csv(after)
    problems, notes = [], []
    compared = [c for c in cols_b if not is_timing(c)]
    missing = [c for c in compared if c not in cols_a]
    if missing:
        problems.append(f"columns missing after: {missing}")
    added = [c for c in cols_a if c not in cols_b]
    if added:
        notes.append(f"columns added after: {added}")
    if len(rows_b) != len(rows_a):
        problems.append(f"{len(rows_b)} rows before, {len(rows_a)} after")
    worst, first_bad, bad_count = 0.0, None, 0
    for i, (rb, ra) in enumerate(zip(rows_b, rows_a)):
        for c in compared:
            if c in missing:
                continue
            ok, rel = values_equal(rb.get(c) or "", ra.get(c) or "")
            if math.isfinite(rel):
                worst = max(worst, rel)
            if not ok:
                bad_count += 1
                if first_bad is None:
                    first_bad = f"row {i + 1} ({'step ' + rb['step'] if 'step' in rb else ''}) " \
                                f"{c}: {rb.get(c)!r} before, {ra.get(c)!r} after"
    if bad_count:
        problems.append(f"{bad_count} values differ, first at {first_bad}")
    stats = (f"{len(rows_b)} rows x {len(compared)} columns, largest relative difference "
             f"{worst:.3g}")
    tail = ("; " + "; ".join(notes)) if notes else ""
    if problems:
        return False, "; ".join(problems) + f" ({stats}){tail}"
    return True, f"same ({stats}){tail}"


def metrics_equal(a, b) -> bool:
    """Numbers equal at 3 decimals; anything else (None, text, bools, counts' types) exactly."""
    def number(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    if number(a) and number(b):
        return round(float(a), 3) == round(float(b), 3)
    return a == b


def compare_item(ib: dict, ia: dict) -> list[str]:
    problems = []
    if ib.get("status") != ia.get("status"):
        problems.append(f"status {ib.get('status')} before, {ia.get('status')} after"
                        + (f" ({ia.get('reason')})" if ia.get("reason") else ""))
    for field in ("method", "dataset", "checkpoint", "test_pairs"):
        if ib.get(field) != ia.get(field):
            problems.append(f"{field} {ib.get(field)!r} before, {ia.get(field)!r} after")
    lb, la = set(ib.get("logs") or []), set(ia.get("logs") or [])
    if lb != la:
        problems.append(f"logs {sorted(lb)} before, {sorted(la)} after")
    mb, ma = ib.get("metrics") or {}, ia.get("metrics") or {}
    diffs = [f"{k} {mb.get(k)!r} -> {ma.get(k)!r}" for k in sorted(set(mb) | set(ma))
             if k not in mb or k not in ma or not metrics_equal(mb[k], ma[k])]
    if diffs:
        problems.append(f"{len(diffs)} metrics differ: " + ", ".join(diffs[:6])
                        + (" ..." if len(diffs) > 6 else ""))
    return problems


def load(folder: Path) -> dict:
    path = folder / "summary.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: cannot read {path}: {err}") from None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: compare.py BEFORE_DIR AFTER_DIR", file=sys.stderr)
        return 2
    before_dir, after_dir = Path(argv[0]), Path(argv[1])
    try:
        sb, sa = load(before_dir), load(after_dir)
    except SystemExit as err:
        print(err, file=sys.stderr)
        return 2
    differ = 0

    def line(name: str, problems: list[str] | str) -> None:
        nonlocal differ
        if isinstance(problems, str):
            print(f"{name}: {problems}")
            return
        if problems:
            differ += 1
            print(f"{name}: DIFFERS: " + "; ".join(problems))
        else:
            print(f"{name}: same")

    items_b, items_a = sb.get("items", {}), sa.get("items", {})
    for key in sorted(set(items_b) | set(items_a)):
        if key not in items_a:
            line(f"item {key}", ["missing after"])
        elif key not in items_b:
            line(f"item {key}", ["new after (not in before)"])
        else:
            line(f"item {key}", compare_item(items_b[key], items_a[key]))
    nb = {n["item"]: n["reason"] for n in sb.get("not_covered", [])}
    na = {n["item"]: n["reason"] for n in sa.get("not_covered", [])}
    for key in sorted(set(nb) | set(na)):
        line(f"not covered {key}", [] if (key in nb) == (key in na) else
             [f"{'only before' if key in nb else 'only after'}"])
    logs_b = {p.name: p for p in (before_dir / "logs").glob("*.csv")}
    logs_a = {p.name: p for p in (after_dir / "logs").glob("*.csv")}
    for name in sorted(set(logs_b) | set(logs_a)):
        if name not in logs_a:
            line(f"log {name}", ["missing after"])
        elif name not in logs_b:
            line(f"log {name}", ["new after (not in before)"])
        else:
            ok, text = compare_log(logs_b[name], logs_a[name])
            if ok:
                print(f"log {name}: {text}")
            else:
                line(f"log {name}", [text])
    for side, s in (("before", sb), ("after", sa)):
        if s.get("tree_changed"):
            line(f"tree {side}", [f"the run changed the tree: {s['tree_changed']}"])
    total = len(set(items_b) | set(items_a)) + len(set(logs_b) | set(logs_a))
    print(f"{differ} of {total} items and logs differ" if differ else
          f"all same ({total} items and logs)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
