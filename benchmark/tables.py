"""The paper's Tables 1-3 from result records, our numbers beside the paper's.

What each table holds is benchmark.paper_tables (the paper's rows and methods) plus the registry
(each method's `title`, `tables`, `amodal` and `uses_ground_truth`). Which records fill a cell:
- Tables 1 and 2 use runs without ablation overrides (`variant` all None); Table 3 rows use
  FlowCapsules runs whose resolved `axes` match the row (paper_tables.AblationRow.matches).
- Partial evaluations never reach here (records.load_records skips them).
- A cell shows the profile of highest rank (benchmark.profiles) that has runs, as mean +-
  sample std over seeds, with the profile and seed count. Runs on data made with the
  generator's current settings come first; a cell that only older data fills says which
  (e.g. "4x4 data": the edge subsamples, see geogen.schema). A cell filled from a user's own
  records (runs/records) says "local".
- Table 1 and Table 3 report amodal IoU with the fixed capsule-to-slot assignment
  (benchmark.metrics); Table 2 the k-means test accuracies (benchmark.clustering).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from benchmark import paper_tables as spec
from benchmark.datasets import LEGACY_SUPERSAMPLE, current_supersample
from benchmark.paper import paper_cell
from benchmark.paper import paper_text as text_numbers
from benchmark.profiles import by_rank

NOT_PUBLIC = "not public"
AMODAL_MARK, GT_MARK, RULE_MARK = "†", "‡", "§"


@dataclass(frozen=True)
class Cell:
    """Our mean +- std over seeds at one profile, and the paper's number as printed."""

    values: tuple[float, ...] = ()
    profile: str | None = None
    paper: float | None = None
    paper_text: str = ""  # the number, "n/r" (none reported), "?" (not transcribed), "" (absent)
    na: str = ""  # why our side cannot hold a number (dataset not public, row not run there)
    data: str = ""  # which older data the runs used, "" for the current data
    local: bool = False  # filled from a user's own records rather than the committed ones
    sources: tuple[str, ...] = ()  # the record files
    mark: str = ""  # a footnote mark after our number

    def ours(self) -> str:
        if self.na:
            return self.na
        if not self.values:
            return "-"
        mean = float(np.mean(self.values))
        where = ", ".join([self.profile or ""] + ([self.data] if self.data else [])
                          + (["local"] if self.local else []))
        if len(self.values) == 1:
            return f"{mean:.3f}{self.mark} ({where})"
        std = float(np.std(self.values, ddof=1))
        return f"{mean:.3f} ± {std:.3f}{self.mark} ({where}, {len(self.values)} seeds)"

    def theirs(self) -> str:
        return self.paper_text


@dataclass
class Table:
    title: str
    row_header: list[str]  # names of the leading label columns
    columns: list[str]  # one (ours, paper) pair of columns each
    rows: list[tuple[list[str], list[Cell]]] = field(default_factory=list)
    missing: set[str] = field(default_factory=set)  # commands that would fill "-" cells
    notes: list[str] = field(default_factory=list)


def _paper(table: int, dataset: str, method: str, row: str, in_paper: bool) -> dict[str, Any]:
    if not in_paper:
        return {"paper": None, "paper_text": ""}
    cell = paper_cell(table, dataset, method, row)
    if cell is None:
        return {"paper": None, "paper_text": "?"}
    if cell.value is None:
        return {"paper": None, "paper_text": "n/r"}
    return {"paper": cell.value, "paper_text": f"{cell.value:.2f}"}


def _supersample(r: dict) -> int:
    return int((r.get("data") or {}).get("supersample") or LEGACY_SUPERSAMPLE)


def _select(records: list[dict], method: str, dataset: str, keep: Callable[[dict], bool],
            value: Callable[[dict], float | None], profile: str | None, **paper) -> Cell:
    """The cell for records of a method and dataset that pass `keep`: runs on the current data
    if there are any, then the best profile (or only `profile`)."""
    chosen = [r for r in records if r["method"] == method and r["dataset"] == dataset
              and keep(r) and (profile is None or r["profile"] == profile)]
    current = [r for r in chosen if _supersample(r) == current_supersample()]
    for name in by_rank():
        runs = [r for r in current or chosen if r["profile"] == name]
        if not runs:
            continue
        older = sorted({_supersample(r) for r in runs} - {current_supersample()})
        values = []
        for r in runs:
            try:
                v = value(r["metrics"])
            except (KeyError, TypeError):
                v = None
            if v is not None:
                values.append(float(v))
        return Cell(values=tuple(values), profile=name,
                    data=" and ".join(f"{s}x{s}" for s in older) + " data" if older else "",
                    local=any(r.get("_local") for r in runs),
                    sources=tuple(r.get("_path", "") for r in runs), **paper)
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


def table1(records: list[dict], methods: dict, profile: str | None = None) -> Table:
    cols = _methods_of(spec.TABLE1, methods)
    headers, notes = [], []
    for name, label in cols:
        m = methods.get(name)
        marks = ""
        if m is not None and not m.amodal:
            marks += AMODAL_MARK
            notes.append(f"{AMODAL_MARK} {label}: visible-only masks, scored against the amodal "
                         f"ground truth; its visible IoU is in its records (metrics.visible_iou).")
        if m is not None and "flow" in m.uses_ground_truth:
            marks += GT_MARK
            notes.append(f"{GT_MARK} {label}: sees the ground-truth flow at test time.")
        headers.append(label + marks)
    t = Table(spec.TABLE1.title, ["dataset", "shape"], headers, notes=notes)
    for ds in spec.DATASETS:
        for part in spec.PARTS:
            cells = []
            for name, _ in cols:
                paper = _paper(1, ds, name, part, name in spec.TABLE1.paper_methods)
                c = _select(records, name, ds, _no_overrides,
                            lambda met, part=part: met["amodal_iou"][part], profile, **paper)
                cells.append(c)
                if c.profile is None:
                    t.missing.add(_run_cmd(name, ds, profile))
            t.rows.append(([spec.DATASET_TITLES[ds], part], cells))
    for part in spec.EXERCISE_PARTS:
        t.rows.append((["Exercise", part], [
            Cell(na=NOT_PUBLIC, **_paper(1, "exercise", n, part, n in spec.TABLE1.paper_methods))
            for n, _ in cols]))
    t.notes += [f"The paper's text: {p.what}: {p.value:g}." for p in text_numbers(1)]
    return t


def _older_rule(cell: Cell, records: list[dict]) -> bool:
    """Whether a record behind the cell labelled its clusters before the majority rule
    (benchmark.clustering: its N = 4 clusters by a one-to-one map)."""
    return any(r.get("_path") in cell.sources and r["metrics"].get("kmeans_rule") != "majority"
               for r in records)


def table2(records: list[dict], methods: dict, profile: str | None = None) -> Table:
    columns = [(ds, n) for ds in spec.DATASETS for n in spec.CLUSTERS]
    t = Table(spec.TABLE2.title, ["method"],
              [f"{spec.DATASET_TITLES[ds]} N={n}" for ds, n in columns])
    older = False
    for name, label in _methods_of(spec.TABLE2, methods):
        cells = []
        for ds, n in columns:
            paper = _paper(2, ds, name, f"N={n}", name in spec.TABLE2.paper_methods)
            c = _select(records, name, ds, _no_overrides, lambda met, n=n: met[f"kmeans_{n}"],
                        profile, **paper)
            if n == 4 and c.values and _older_rule(c, records):
                c = replace(c, mark=RULE_MARK)
                older = True
            cells.append(c)
            if c.profile is None:
                t.missing.add(_run_cmd(name, ds, profile))
        t.rows.append(([label], cells))
    t.notes.append(f"{spec.PAPER_TITLES['flowscae']}: the paper's FlowCapsules row, made with its "
                   f"FlowSCAE protocol (SCAE's object capsules trained on FlowCapsules' part "
                   f"poses). Rows not in the paper have no paper number.")
    if older:
        t.notes.append(f"{RULE_MARK} N=4 from records made before the paper's labelling rule "
                       f"(each cluster predicts its most common training class): their 4 "
                       f"clusters were labelled one-to-one; rerun to refresh.")
    t.notes += [f"The paper's text: {p.what}: {p.value:g}." for p in text_numbers(2)]
    return t


def table3(records: list[dict], methods: dict | None = None, profile: str | None = None) -> Table:
    t = Table(spec.TABLE3_TITLE, ["ablation"], [spec.DATASET_TITLES[ds] for ds in spec.DATASETS])
    for row in spec.ABLATION_ROWS:
        cells = []
        for ds in spec.DATASETS:
            if ds not in row.datasets:
                cells.append(Cell(na="n/a"))  # the paper ran this row on Geo only
                continue
            c = _select(records, spec.TABLE3_METHOD, ds,
                        row.matches,
                        lambda met: met["amodal_iou"]["all"], profile,
                        **_paper(3, ds, spec.TABLE3_METHOD, row.label, True))
            cells.append(c)
            if c.profile is None:
                t.missing.add(f"flowbench ablate --dataset {ds}"
                              + (f" --profile {profile}" if profile else ""))
        t.rows.append(([row.label], cells))
    t.notes.append("A run fills a row when its model's axes equal every axis the row states and "
                   "it changed no other axis from the method's default. The K, |s| rows also "
                   "state depth ordering on and leave the decoder depth free (the paper does not "
                   "state it there; ours has 3 layers); the depth-ordering rows also state K = 8, "
                   "|s| = 27 (benchmark/paper_tables.py).")
    return t


def build_tables(records: list[dict], methods: dict | None = None,
                 profile: str | None = None) -> list[Table]:
    """Tables 1-3; `methods` defaults to the registry, `profile` restricts cells to one."""
    if methods is None:
        from benchmark.registry import load_methods
        methods = load_methods()
    return [table1(records, methods, profile), table2(records, methods, profile),
            table3(records, methods, profile)]


def _header(t: Table) -> list[str]:
    return t.row_header + [h for c in t.columns for h in (f"{c} (ours)", f"{c} (paper)")]


def _body(t: Table) -> list[list[str]]:
    return [list(labels) + [s for c in cells for s in (c.ours(), c.theirs())]
            for labels, cells in t.rows]


LEGEND = ("ours: mean ± std over seeds (profile, seeds), from the result records "
          "(results/records; \"local\": your own runs in runs/records); "
          "paper: Sabour et al., ICML 2021 (benchmark/data/paper.json); "
          "- = no run yet; n/r = the paper reports no number; \"4x4 data\": runs on data made "
          "with the generator's former 4 x 4 edge subsamples (geogen.schema), shown only where "
          "no run on the current data fills the cell.")


def render_markdown(tables: list[Table]) -> str:
    parts = [LEGEND]
    for t in tables:
        head = [h.replace("|", "\\|") for h in _header(t)]
        lines = [f"**{t.title}**", "", "| " + " | ".join(head) + " |",
                 "|" + "|".join("---" for _ in head) + "|"]
        # A bare "|" (as in |s|) would split a markdown cell.
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in _body(t)]
        if t.notes:
            lines += [""] + t.notes
        if t.missing:
            lines += ["", "Cells marked - have no value yet; the runs that fill them: "
                      + "; ".join(f"`{c}`" for c in sorted(t.missing)) + "."]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _latex_escape(s: str) -> str:
    return (s.replace("\\", "\\textbackslash{}").replace("&", "\\&").replace("%", "\\%")
            .replace("_", "\\_").replace("#", "\\#").replace("|", "$|$").replace("±", "$\\pm$")
            .replace(AMODAL_MARK, "$^\\dagger$").replace(GT_MARK, "$^\\ddagger$"))


def render_latex(tables: list[Table]) -> str:
    parts = []
    for t in tables:
        head = _header(t)
        lines = ["\\begin{table}[t]", "\\centering", f"\\caption{{{_latex_escape(t.title)}}}",
                 "\\begin{tabular}{" + "l" * len(t.row_header) + "rr" * len(t.columns) + "}",
                 "\\toprule", " & ".join(_latex_escape(h) for h in head) + " \\\\", "\\midrule"]
        lines += [" & ".join(_latex_escape(c) for c in r) + " \\\\" for r in _body(t)]
        lines += ["\\bottomrule", "\\end{tabular}"]
        lines += [f"\\par\\footnotesize {_latex_escape(n)}" for n in t.notes]
        lines += ["\\end{table}"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def render_csv(tables: list[Table]) -> str:
    """Long format: one line per (table, row, column) with the numbers unformatted and the
    record files behind each cell."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["table", "row", "column", "ours_mean", "ours_std", "seeds", "profile", "paper",
                "note", "records"])
    for t in tables:
        for labels, cells in t.rows:
            for col, c in zip(t.columns, cells):
                n = len(c.values)
                mean = f"{np.mean(c.values):.6f}" if n else ""
                std = f"{np.std(c.values, ddof=1):.6f}" if n > 1 else ""
                paper = c.paper if c.paper is not None else ("" if c.paper_text in ("", "?")
                                                             else c.paper_text)
                note = "; ".join(x for x in (c.na, c.data, "local" if c.local else "") if x)
                w.writerow([t.title.split(":")[0], " / ".join(labels), col, mean, std, n,
                            c.profile or "", paper, note, " ".join(c.sources)])
    return buf.getvalue()


RENDERERS = {"md": render_markdown, "latex": render_latex, "csv": render_csv}
