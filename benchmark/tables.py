"""The paper's Tables 1-3 from result records, our numbers beside the paper's.

What each table holds is benchmark.paper_tables (the paper's rows and methods) plus the registry
(each method's `title`, `tables`, `amodal` and `uses_ground_truth`). Which records fill a cell:
- Tables 1 and 2 use runs without ablation overrides (`variant` all None); Table 3 rows use
  FlowCapsules runs whose resolved `axes` match the row (paper_tables.AblationRow.matches).
- Partial evaluations and records scored under an older segmentation rule never reach here
  (records.load_records skips them).
- A cell shows the profile of highest rank (benchmark.profiles) that has runs, as mean +-
  sample std over seeds, with the profile and seed count. A cell filled from a user's own
  records (runs/records) says "local"; beside committed records those fill rows of their own
  ("Geo (local)"), never the committed mean (build_tables).
- Table 1 comes in two parts, each of our cells holding, for every method alike, the fixed
  capsule-to-slot assignment's number and the per-image assignment's (benchmark.metrics),
  "fixed / per image": 1a amodal IoU, where a method with visible-only masks shows the
  ceiling (the ground-truth visible masks scored against the amodal truth, read from the
  records of the dataset) and never a score; 1b visible IoU for every method. A side a
  record lacks is "-", and a note says so.
  The paper's cells stand beside the measure they report (paper_tables.TABLE1_PAPER_VISIBLE).
  The csv gives the two numbers and the ceiling as columns of their own.
- Table 3 reports amodal IoU with the fixed assignment; Table 2 the k-means test accuracies
  (benchmark.clustering).
- Geo+ records of the camouflage look (records.record_look: every one made before looks were
  recorded) are not the paper's Geo+: they fill rows and columns of their own, "Geo+
  (camouflage)", with no paper number, shown once such a record exists (`_datasets`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from benchmark import paper_tables as spec
from benchmark.paper import paper_cell
from benchmark.paper import paper_text as text_numbers
from benchmark.profiles import by_rank

NOT_PUBLIC = "not public"
NO_CEILING = "ceiling: -"  # a visible-only method's Table 1a cell where no record has one
AMODAL_MARK, GT_MARK = "†", "‡"
COLLAPSED = "collapsed"
# A run whose every amodal IoU is at most this drew no mask over any shape: its masks collapsed.
COLLAPSE_IOU = 1e-3


@dataclass(frozen=True)
class Cell:
    """Our mean +- std over seeds at one profile, and the paper's number as printed."""

    values: tuple[float, ...] = ()
    profile: str | None = None
    paper: float | None = None
    paper_text: str = ""  # the number, "n/r" (none reported), "?" (not transcribed), "" (absent)
    na: str = ""  # why our side cannot hold a number (dataset not public, row not run there)
    local: bool = False  # filled from a user's own records rather than the committed ones
    sources: tuple[str, ...] = ()  # the record files
    # The same runs under the per-image assignment (Table 1's cells: shown after the fixed
    # one's); None in a cell that shows one number (Tables 2 and 3).
    per_image: tuple[float, ...] | None = None
    ceiling: float | None = None  # shown instead of a score (a visible-only method, Table 1a)
    collapsed: int = 0  # runs left out of `values` because their masks collapsed (Table 3)

    def lacks_per_image(self) -> bool:
        """Whether some of the cell's runs have no per-image number (that side shows "-")."""
        return self.per_image is not None and len(self.per_image) < len(self.values)

    def ours(self) -> str:
        if self.ceiling is not None:
            return f"ceiling {self.ceiling:.3f}"
        if self.na:
            return self.na
        where = ", ".join([self.profile or ""] + (["local"] if self.local else []))
        if not self.values:
            if self.collapsed:
                seeds = f", {self.collapsed} seeds" if self.collapsed > 1 else ""
                return f"{COLLAPSED} ({where}{seeds})"
            return "-"
        shown = _mean_std(self.values)
        if self.per_image is not None:
            shown += " / " + ("-" if self.lacks_per_image() else _mean_std(self.per_image))
        seeds = [f"{len(self.values)} seeds"] if len(self.values) > 1 else []
        also = f"; {self.collapsed} {COLLAPSED}" if self.collapsed else ""
        return f"{shown} ({', '.join([where] + seeds)}{also})"

    def theirs(self) -> str:
        return self.paper_text


def _mean_std(values: tuple[float, ...]) -> str:
    """'0.955' for one seed, '0.955 ± 0.004' (sample std) for several."""
    mean = float(np.mean(values))
    if len(values) == 1:
        return f"{mean:.3f}"
    return f"{mean:.3f} ± {float(np.std(values, ddof=1)):.3f}"


@dataclass
class Table:
    title: str
    row_header: list[str]  # names of the leading label columns
    columns: list[str]  # one (ours, paper) pair of columns each
    rows: list[tuple[list[str], list[Cell]]] = field(default_factory=list)
    missing: set[str] = field(default_factory=set)  # commands that would fill "-" cells
    notes: list[str] = field(default_factory=list)
    ours: str = "ours"  # what the header says our columns hold


TABLE1_OURS = "ours: fixed / per image"  # Table 1's columns: both assignments, every method


def _want(t: "Table", dataset: str, command: str) -> None:
    """Name the run that fills an empty cell; none for the camouflage look, which the
    benchmark's own data no longer has (it is made with `geogen make --look camouflage`)."""
    if dataset != spec.CAMOUFLAGE:
        t.missing.add(command)


def _paper(table: int, dataset: str, method: str, row: str, in_paper: bool) -> dict[str, Any]:
    if not in_paper or dataset == spec.CAMOUFLAGE:  # not the paper's data: no paper number
        return {"paper": None, "paper_text": ""}
    cell = paper_cell(table, dataset, method, row)
    if cell is None:
        return {"paper": None, "paper_text": "?"}
    if cell.value is None:
        return {"paper": None, "paper_text": "n/r"}
    return {"paper": cell.value, "paper_text": f"{cell.value:.2f}"}


def _values(runs: list[dict], value: Callable[[dict], float | None] | None) -> tuple[float, ...]:
    if value is None:
        return ()
    out = []
    for r in runs:
        try:
            v = value(r["metrics"])
        except (KeyError, TypeError):
            v = None
        if v is not None:
            out.append(float(v))
    return tuple(out)


def _select(records: list[dict], method: str, dataset: str, keep: Callable[[dict], bool],
            value: Callable[[dict], float | None], profile: str | None,
            per_image: Callable[[dict], float | None] | None = None,
            collapsed: Callable[[dict], bool] = lambda met: False, **paper) -> Cell:
    """The cell for records of a method and dataset that pass `keep`: the best profile's runs
    (or only `profile`'s); those whose metrics are `collapsed` are counted, not averaged."""
    chosen = [r for r in records if r["method"] == method and spec.table_dataset(r) == dataset
              and keep(r) and (profile is None or r["profile"] == profile)]
    for name in by_rank():
        runs = [r for r in chosen if r["profile"] == name]
        if not runs:
            continue
        scored = [r for r in runs if not collapsed(r["metrics"])]
        return Cell(values=_values(scored, value),
                    per_image=None if per_image is None else _values(scored, per_image),
                    profile=name, local=any(r.get("_local") for r in runs),
                    sources=tuple(r.get("_path", "") for r in runs),
                    collapsed=len(runs) - len(scored), **paper)
    return Cell(**paper)


def _no_overrides(r: dict) -> bool:
    return all(v is None for v in (r.get("variant") or {}).values())


def _methods_of(table: spec.TableSpec, methods: dict) -> list[tuple[str, str]]:
    """(name, label) of the table's methods: the paper's, then every other registered method
    that says it fills this table, in registration order."""
    names = list(table.paper_methods) + [n for n, m in methods.items()
                                         if table.number in m.tables
                                         and n not in table.paper_methods]
    out = []
    for n in names:
        m = methods.get(n)
        title = m.title if m is not None else spec.PAPER_TITLES[n]
        out.append((n, table.label(n, title)))
    return out


def _run_cmd(method: str, dataset: str, profile: str | None) -> str:
    return f"flowbench run {method} --dataset {dataset}" + (f" --profile {profile}" if profile else "")


def _visible_only(method) -> bool:
    return method is not None and not method.amodal


@dataclass(frozen=True)
class Ceiling:
    """The ceiling of a dataset's test pairs, as its records computed it (every full record of
    a dataset scores the same test pairs)."""

    values: dict[str, float | None]  # per part and "all"
    n_test: int
    source: str  # the record it was read from


def _scores(met: dict, groups: bool) -> dict:
    """A record's segmentation numbers: per slot, or (groups) per Table 1 group of slots."""
    return (met.get("groups") or {}) if groups else met


def _ceiling(records: list[dict], dataset: str, groups: bool = False) -> Ceiling | None:
    """The ceiling of the dataset from the record with the most test pairs; None when no record
    has one."""
    have = [r for r in records if spec.table_dataset(r) == dataset
            and _scores(r["metrics"], groups).get("ceiling")]
    if not have:
        return None
    r = min(have, key=lambda r: (-int(r["metrics"].get("n_test") or 0), r.get("_path", "")))
    return Ceiling(_scores(r["metrics"], groups)["ceiling"], int(r["metrics"].get("n_test") or 0),
                   r.get("_path", ""))


def _gt_note(labels: list[str]) -> list[str]:
    """One note for every method that sees the ground-truth flow (none: no note)."""
    if not labels:
        return []
    verb = "sees" if len(labels) == 1 else "see"
    return [f"{GT_MARK} {', '.join(labels)}: {verb} the ground-truth flow at test time."]


def _lacking_per_image_note(t: Table) -> list[str]:
    """One note when a cell's records lack the per-image number (none: no note)."""
    labels = sorted({t.columns[i] for _, cells in t.rows for i, c in enumerate(cells)
                     if c.lacks_per_image()})
    if not labels:
        return []
    return [f"{', '.join(labels)}: some records lack the per-image assignment's number, so the "
            f"per-image side of those cells is -."]


def _visible_only_note(labels: list[str]) -> list[str]:
    """One note for every visible-only method of Table 1a (none: no note)."""
    if not labels:
        return []
    one = len(labels) == 1
    return [f"{AMODAL_MARK} {', '.join(labels)}: visible-only masks; {'its' if one else 'their'} "
            f"cells here are the ceiling (what the ground-truth visible masks score against the "
            f"amodal truth), not a score; {'its' if one else 'their'} visible IoU is in Table 1b."]


def _part(key: str, part: str, groups: bool = False) -> Callable[[dict], float | None]:
    return lambda met: _scores(met, groups)[key][part]


def table1(records: list[dict], methods: dict, profile: str | None = None,
           datasets: tuple[str, ...] | None = None) -> Table:
    """Table 1a: amodal IoU; a visible-only method's cells hold the dataset's ceiling."""
    datasets = datasets or spec.table_datasets(records)
    cols = _methods_of(spec.TABLE1, methods)
    headers, visible_only, sees = [], [], []
    for name, label in cols:
        m = methods.get(name)
        marks = ""
        if _visible_only(m):
            marks += AMODAL_MARK
            visible_only.append(label)
        if m is not None and "flow" in m.uses_ground_truth:
            marks += GT_MARK
            sees.append(label)
        headers.append(label + marks)
    notes = _visible_only_note(visible_only) + _gt_note(sees)
    t = Table(spec.TABLE1.title, ["dataset", "shape"], headers, notes=notes, ours=TABLE1_OURS)
    ceilings = {ds: _ceiling(records, ds) for ds in datasets}
    for ds in datasets:
        for part in spec.PARTS:
            cells = []
            for name, _ in cols:
                paper = _paper(1, ds, name, part, name in spec.TABLE1.paper_methods
                               and name not in spec.TABLE1_PAPER_VISIBLE)
                if _visible_only(methods.get(name)):
                    ceil = ceilings[ds]
                    cells.append(Cell(ceiling=ceil.values.get(part), sources=(ceil.source,),
                                      **paper) if ceil else Cell(na=NO_CEILING, **paper))
                    continue
                c = _select(records, name, ds, _no_overrides, _part("amodal_iou", part),
                            profile, per_image=_part("amodal_iou_per_image", part), **paper)
                cells.append(c)
                if c.profile is None:
                    _want(t, ds, _run_cmd(name, ds, profile))
            t.rows.append(([spec.DATASET_TITLES[ds], part], cells))
    _exercise_rows(t, cols, visible=False)
    _stand_in_rows(t, records, cols, methods, profile, visible=False)
    t.notes += spec.camouflage_note(datasets)
    t.notes += _lacking_per_image_note(t)
    known = [(ds, c) for ds, c in ceilings.items() if c]
    if known:
        t.notes.append("Ceiling: the ground-truth visible masks scored against the amodal truth "
                       "of the same test pairs, " + "; ".join(
                           f"{spec.DATASET_TITLES[ds]} ({c.n_test} pairs): "
                           + ", ".join(f"{p} {c.values[p]:.3f}" for p in spec.PARTS
                                       if c.values.get(p) is not None)
                           for ds, c in known) + ".")
    t.notes.append(f"The paper's {' and '.join(_paper_titles(methods))} cells are in Table 1b: "
                   f"those methods give visible-only masks, so the paper's numbers can only be "
                   f"visible IoU.")
    t.notes += [f"The paper's text: {p.what}: {p.value:g}." for p in text_numbers(1)]
    return t


def _paper_titles(methods: dict) -> list[str]:
    return [methods[n].title if n in methods else spec.PAPER_TITLES[n]
            for n in spec.TABLE1_PAPER_VISIBLE]


def _exercise_rows(t: Table, cols: list[tuple[str, str]], visible: bool) -> None:
    """The Exercise rows: the paper's numbers where they belong, ours not public."""
    for part in spec.EXERCISE_PARTS:
        t.rows.append((["Exercise", part], [
            Cell(na=NOT_PUBLIC, **_paper(1, "exercise", n, part, n in spec.TABLE1.paper_methods
                                         and (n in spec.TABLE1_PAPER_VISIBLE) == visible))
            for n, _ in cols]))


def _stand_in_rows(t: Table, records: list[dict], cols: list[tuple[str, str]], methods: dict,
                   profile: str | None, visible: bool) -> None:
    """The public stand-in for Exercise (paper_tables.STAND_IN): our articulated figures in
    the Exercise parts, each a group of slots (the records' "groups"); no paper numbers.
    The rows appear once a record of the dataset exists (the README's tables stay as they are
    until then)."""
    ds, key = spec.STAND_IN, "visible_iou" if visible else "amodal_iou"
    if not any(r["dataset"] == ds for r in records):
        return
    ceil = None if visible else _ceiling(records, ds, groups=True)
    for part in spec.EXERCISE_PARTS:
        cells = []
        for name, _ in cols:
            if not visible and _visible_only(methods.get(name)):
                cells.append(Cell(ceiling=ceil.values.get(part), sources=(ceil.source,))
                             if ceil else Cell(na="ceiling: -"))
                continue
            c = _select(records, name, ds, _no_overrides, _part(key, part, groups=True), profile,
                        per_image=_part(f"{key}_per_image", part, groups=True))
            cells.append(c)
            if c.profile is None:
                t.missing.add(_run_cmd(name, ds, profile))
        t.rows.append(([spec.DATASET_TITLES[ds], part], cells))
    if ceil is not None:
        t.notes.append(f"Ceiling of the {spec.DATASET_TITLES[ds]} rows ({ceil.n_test} pairs): "
                       + ", ".join(f"{p} {ceil.values[p]:.3f}" for p in spec.EXERCISE_PARTS
                                   if ceil.values.get(p) is not None) + ".")
    t.notes.append(f"{spec.DATASET_TITLES[ds]}: geogen's articulated figures (ten rigid parts "
                   f"in a kinematic tree); each row scores a whole part as the paper's Exercise "
                   f"rows do (a leg: its upper and lower leg together), \"all\" over the three; "
                   f"every part's own numbers are in the records, and in those scored since "
                   f"2026-12-05 each limb scored by its parts' capsules together "
                   f"(groups.parts_union, docs/benchmark.md).")


def table1_visible(records: list[dict], methods: dict, profile: str | None = None,
                   datasets: tuple[str, ...] | None = None) -> Table:
    """Table 1b: visible IoU of every method."""
    datasets = datasets or spec.table_datasets(records)
    cols = _methods_of(spec.TABLE1, methods)
    headers, seeing = [], []
    for name, label in cols:
        m = methods.get(name)
        sees = m is not None and "flow" in m.uses_ground_truth
        headers.append(label + (GT_MARK if sees else ""))
        if sees:
            seeing.append(label)
    t = Table(spec.TABLE1_VISIBLE_TITLE, ["dataset", "shape"], headers, notes=_gt_note(seeing),
              ours=TABLE1_OURS)
    for ds in datasets:
        for part in spec.PARTS:
            cells = []
            for name, _ in cols:
                paper = _paper(1, ds, name, part, name in spec.TABLE1_PAPER_VISIBLE
                               and name in spec.TABLE1.paper_methods)
                c = _select(records, name, ds, _no_overrides, _part("visible_iou", part),
                            profile, per_image=_part("visible_iou_per_image", part), **paper)
                cells.append(c)
                if c.profile is None:
                    _want(t, ds, _run_cmd(name, ds, profile))
            t.rows.append(([spec.DATASET_TITLES[ds], part], cells))
    _exercise_rows(t, cols, visible=True)
    _stand_in_rows(t, records, cols, methods, profile, visible=True)
    t.notes += spec.camouflage_note(datasets)
    t.notes += _lacking_per_image_note(t)
    t.notes.append("The paper's FlowCapsules cells are in Table 1a (its amodal masks).")
    return t


def table2(records: list[dict], methods: dict, profile: str | None = None,
           datasets: tuple[str, ...] | None = None) -> Table:
    columns = [(ds, n) for ds in datasets or spec.table_datasets(records) for n in spec.CLUSTERS]
    t = Table(spec.TABLE2.title, ["method"],
              [f"{spec.DATASET_TITLES[ds]} N={n}" for ds, n in columns])
    for name, label in _methods_of(spec.TABLE2, methods):
        cells = []
        for ds, n in columns:
            paper = _paper(2, ds, name, f"N={n}", name in spec.TABLE2.paper_methods)
            c = _select(records, name, ds, _no_overrides, lambda met, n=n: met[f"kmeans_{n}"],
                        profile, **paper)
            cells.append(c)
            if c.profile is None:
                _want(t, ds, _run_cmd(name, ds, profile))
        t.rows.append(([label], cells))
    t.notes.append(f"{spec.PAPER_TITLES['flowscae']}: the paper's FlowCapsules row, made with its "
                   f"FlowSCAE protocol (SCAE's object capsules trained on FlowCapsules' part "
                   f"poses). Rows not in the paper have no paper number.")
    t.notes += [f"The paper's text: {p.what}: {p.value:g}." for p in text_numbers(2)]
    return t


def masks_collapsed(met: dict) -> bool:
    """Every amodal IoU of a run is ~0: no mask rose above 0.5 over any shape (they collapsed)."""
    ious = [v for v in (met.get("amodal_iou") or {}).values() if v is not None]
    return bool(ious) and max(ious) <= COLLAPSE_IOU


def table3(records: list[dict], methods: dict | None = None, profile: str | None = None,
           datasets: tuple[str, ...] | None = None) -> Table:
    datasets = datasets or spec.table_datasets(records)
    t = Table(spec.TABLE3_TITLE, ["ablation", "masks scored"],
              [spec.DATASET_TITLES[ds] for ds in datasets])
    for row in spec.ABLATION_ROWS:
        cells = []
        for ds in datasets:
            if spec.variant_of(ds) not in row.datasets:
                cells.append(Cell(na="n/a"))  # the paper ran this row on Geo only
                continue
            c = _select(records, spec.TABLE3_METHOD, ds,
                        row.matches,
                        lambda met: met["amodal_iou"]["all"], profile,
                        collapsed=masks_collapsed,
                        **_paper(3, ds, spec.TABLE3_METHOD, row.label, True))
            cells.append(c)
            if c.profile is None:
                _want(t, ds, f"flowbench ablate --dataset {ds}"
                      + (f" --profile {profile}" if profile else ""))
        t.rows.append(([row.label, row.scored], cells))
    if any(c.collapsed for _, cells in t.rows for c in cells):
        t.notes.append(f"{COLLAPSED}: every amodal IoU of the run is {COLLAPSE_IOU:g} or less: "
                       f"its masks collapsed (near 0 everywhere, none above 0.5 over any shape), "
                       f"so its 0 measures the collapse, not the ablation; such runs are left "
                       f"out of the cell's mean.")
    t.notes.append("A run fills a row when its model's axes equal every axis the row states and "
                   "it changed no other axis from the method's default. The K, |s| rows also "
                   "state depth ordering on and leave the decoder depth free (the paper does not "
                   "state it there; ours has 3 layers); the depth-ordering rows also state K = 8, "
                   "|s| = 27 (benchmark/paper_tables.py).")
    return t


LOCAL_ROW = " (local)"  # after the first label of a row of a user's own runs


def _tables(records: list[dict], methods: dict, profile: str | None,
            datasets: tuple[str, ...]) -> list[Table]:
    return [table1(records, methods, profile, datasets),
            table1_visible(records, methods, profile, datasets),
            table2(records, methods, profile, datasets),
            table3(records, methods, profile, datasets)]


def _with_local_rows(t: Table, local: Table) -> Table:
    """`t` with, after each row, the same row of `local` (a user's own runs) where one of its
    cells holds a number: its first label marked, no paper number, no ceiling (the row above
    shows those)."""
    rows = []
    for (labels, cells), (_, mine) in zip(t.rows, local.rows):
        rows.append((labels, cells))
        if any(c.values for c in mine):
            rows.append(([labels[0] + LOCAL_ROW] + labels[1:],
                         [_local_cell(c) for c in mine]))
    return replace(t, rows=rows)


def _local_cell(c: Cell) -> Cell:
    """A cell of a local row: its runs without the paper's number; why it holds none (n/a),
    but no ceiling, which the committed row shows."""
    if c.values:
        return replace(c, paper=None, paper_text="")
    return Cell(na="" if c.na == NO_CEILING else c.na)


def build_tables(records: list[dict], methods: dict | None = None,
                 profile: str | None = None) -> list[Table]:
    """Tables 1a, 1b, 2 and 3; `methods` defaults to the registry, `profile` restricts cells
    to one. Committed records and a user's own (`_local`) never share a cell: when both are
    there the user's fill rows of their own, after the committed row they match."""
    if methods is None:
        from benchmark.registry import load_methods
        methods = load_methods()
    committed = [r for r in records if not r.get("_local")]
    local = [r for r in records if r.get("_local")]
    datasets = spec.table_datasets(records)  # of all records: committed and local rows pair up
    if not committed or not local:
        return _tables(records, methods, profile, datasets)
    return [_with_local_rows(t, mine) for t, mine in
            zip(_tables(committed, methods, profile, datasets),
                _tables(local, methods, profile, datasets))]
