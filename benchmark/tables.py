"""The paper's Tables 1-3 from result records, our numbers beside the paper's.

Which records fill which cell:
- Tables 1 and 2 use runs without ablation overrides (`variant` all None).
- A Table 3 row "axis = value" uses runs whose resolved `axes` has that value and
  whose overrides touch no other axis; so the default run also fills its own rows
  (K=8, |s|=27, depth ordering on).
- A cell shows the highest-fidelity profile that has runs (paper, then long, gpu, quick,
  smoke), as mean +- sample std over seeds, with the profile and seed count. Runs on data made
  with the generator's current settings come first; a cell that only older data fills says
  which (e.g. "4x4 data": the edge subsamples, see geogen.schema).
- Table 1 and Table 3 report amodal IoU with the fixed capsule-to-slot assignment
  (benchmark.metrics); Table 2 the k-means test accuracies (benchmark.clustering).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import numpy as np

from benchmark.paper import paper_value
from geogen.make import MakeConfig

CURRENT_SUPERSAMPLE = MakeConfig().supersample
# Records written before they noted it were all made with 4, the generator's only default
# until 2026-11-27.
LEGACY_SUPERSAMPLE = 4

# Best first: the paper's scale, then by training pairs seen (long: 2.95M pairs in its 135
# minutes on a 2-core CPU; gpu: 1.5M in 5.25 minutes), then the 23-minute quick runs.
PROFILE_ORDER = ("paper", "long", "gpu", "quick", "smoke")
DATASET_TITLES = {"geo": "Geo", "geo+": "Geo+"}
METHOD_TITLES = {"rnem": "R-NEM", "psd": "PSD", "flowcaps": "FlowCapsules", "scae": "SCAE"}
NOT_PUBLIC = "not available: the dataset is not public"
AXES = ("num_capsules", "shape_dim", "decoder_depth", "depth_ordering")
# Table 3's rows: (label, axis, value, datasets).
ABLATION_ROWS: tuple[tuple[str, str, object, tuple[str, ...]], ...] = (
    ("K=4", "num_capsules", 4, ("geo", "geo+")),
    ("K=8", "num_capsules", 8, ("geo", "geo+")),
    ("K=16", "num_capsules", 16, ("geo", "geo+")),
    ("|s|=3", "shape_dim", 3, ("geo", "geo+")),
    ("|s|=11", "shape_dim", 11, ("geo", "geo+")),
    ("|s|=27", "shape_dim", 27, ("geo", "geo+")),
    ("decoder depth 2", "decoder_depth", 2, ("geo",)),
    ("decoder depth 6", "decoder_depth", 6, ("geo",)),
    ("depth ordering on", "depth_ordering", True, ("geo",)),
    ("depth ordering off", "depth_ordering", False, ("geo",)),
)


@dataclass(frozen=True)
class Cell:
    """Our mean +- std over seeds at one profile, and the paper's number."""

    values: tuple[float, ...] = ()
    profile: str | None = None
    paper: float | None = None
    na: str = ""  # why the cell cannot hold a number (dataset not public, not in the paper)
    data: str = ""  # which older data the runs used, "" for the current data

    def ours(self) -> str:
        if self.na:
            return self.na
        if not self.values:
            return "-"
        mean = float(np.mean(self.values))
        where = self.profile + (f", {self.data}" if self.data else "")
        if len(self.values) == 1:
            return f"{mean:.3f} ({where})"
        std = float(np.std(self.values, ddof=1))
        return f"{mean:.3f} ± {std:.3f} ({where}, {len(self.values)} seeds)"

    def theirs(self) -> str:
        return "" if self.na else ("?" if self.paper is None else f"{self.paper:.2f}")


@dataclass
class Table:
    title: str
    row_header: list[str]  # names of the leading label columns
    columns: list[str]  # one (ours, paper) pair of columns each
    rows: list[tuple[list[str], list[Cell]]] = field(default_factory=list)
    missing: set[str] = field(default_factory=set)  # commands that would fill "-" cells


def _supersample(r: dict) -> int:
    return int(r.get("data", {}).get("supersample") or LEGACY_SUPERSAMPLE)


def _select(records: list[dict], method: str, dataset: str, keep, paper=None) -> Cell:
    """The cell for records of a method and dataset that pass `keep`: runs on the current data
    if there are any, then the best profile."""
    chosen = [r for r in records if r["method"] == method and r["dataset"] == dataset and keep(r)]
    current = [r for r in chosen if _supersample(r) == CURRENT_SUPERSAMPLE]
    for profile in PROFILE_ORDER:
        runs = [r for r in current or chosen if r["profile"] == profile]
        if runs:
            older = sorted({_supersample(r) for r in runs} - {CURRENT_SUPERSAMPLE})
            return Cell(values=tuple(v for v in (r["_value"] for r in runs) if v is not None),
                        profile=profile, paper=paper,
                        data=" and ".join(f"{s}x{s}" for s in older) + " data" if older else "")
    return Cell(paper=paper)


def _with_value(records: list[dict], getter) -> list[dict]:
    out = []
    for r in records:
        try:
            v = getter(r["metrics"])
        except (KeyError, TypeError):
            v = None
        out.append({**r, "_value": v})
    return out


def _no_overrides(r: dict) -> bool:
    return all(v is None for v in r.get("variant", {}).values())


def table1(records: list[dict]) -> Table:
    methods = ["rnem", "psd", "flowcaps"]
    t = Table("Table 1: IoU of inferred amodal masks against ground truth (fixed assignment)",
              ["dataset", "shape"], [METHOD_TITLES[m] for m in methods])
    for ds in ("geo", "geo+"):
        for row in ("circle", "square", "triangle", "all"):
            recs = _with_value(records, lambda m, row=row: m["amodal_iou"][row])
            cells = []
            for m in methods:
                c = _select(recs, m, ds, _no_overrides, paper_value(1, ds, m, row))
                cells.append(c)
                if c.profile is None:
                    t.missing.add(f"flowbench run {m} --dataset {ds}")
            t.rows.append(([DATASET_TITLES[ds], row], cells))
    t.rows.append((["Exercise", "all"], [Cell(na=NOT_PUBLIC) for _ in methods]))
    return t


def table2(records: list[dict]) -> Table:
    t = Table("Table 2: unsupervised classification, k-means test accuracy",
              ["method"], [f"{DATASET_TITLES[ds]} N={n}" for ds in ("geo", "geo+") for n in (4, 100)])
    for m in ("scae", "flowcaps"):
        cells = []
        for ds in ("geo", "geo+"):
            for n in (4, 100):
                recs = _with_value(records, lambda met, n=n: met[f"kmeans_{n}"])
                c = _select(recs, m, ds, _no_overrides, paper_value(2, ds, m, f"N={n}"))
                cells.append(c)
                if c.profile is None:
                    t.missing.add(f"flowbench run {m} --dataset {ds}")
        t.rows.append(([METHOD_TITLES[m]], cells))
    t.rows.append((["Exercise"], [Cell(na=NOT_PUBLIC) for _ in t.columns]))
    return t


def _ablation_keep(axis: str, value: object):
    def keep(r: dict) -> bool:
        if r.get("axes", {}).get(axis) != value:
            return False
        return all(v is None for k, v in r.get("variant", {}).items() if k != axis)
    return keep


def table3(records: list[dict]) -> Table:
    t = Table("Table 3: FlowCapsules ablations, amodal IoU 'all' (fixed assignment)",
              ["ablation"], [DATASET_TITLES[ds] for ds in ("geo", "geo+")])
    recs = _with_value(records, lambda m: m["amodal_iou"]["all"])
    for label, axis, value, datasets in ABLATION_ROWS:
        cells = []
        for ds in ("geo", "geo+"):
            if ds not in datasets:
                cells.append(Cell(na="n/a"))  # the paper ran this axis on Geo only
                continue
            c = _select(recs, "flowcaps", ds, _ablation_keep(axis, value),
                        paper_value(3, ds, "flowcaps", label))
            cells.append(c)
            if c.profile is None:
                t.missing.add(f"flowbench ablate --dataset {ds}")
        t.rows.append(([label], cells))
    return t


def _header(t: Table) -> list[str]:
    return t.row_header + [h for c in t.columns for h in (f"{c} (ours)", f"{c} (paper)")]


def _body(t: Table) -> list[list[str]]:
    out = []
    for labels, cells in t.rows:
        texts = [s for c in cells for s in (c.ours(), c.theirs())]
        if all(c.na == NOT_PUBLIC for c in cells):  # say it once for the whole row
            texts = [NOT_PUBLIC] + [""] * (len(texts) - 1)
        out.append(list(labels) + texts)
    return out


LEGEND = ("ours: mean ± std over seeds (profile, seeds), from the result records; "
          "paper: Sabour et al., ICML 2021 (benchmark/data/paper.json); "
          "? = a paper number not transcribed; - = no run yet; \"4x4 data\": runs on data made "
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
        if t.missing:
            lines += ["", "Cells marked - have no value yet; the runs that fill them: "
                      + "; ".join(f"`{c}`" for c in sorted(t.missing)) + "."]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _latex_escape(s: str) -> str:
    return (s.replace("\\", "\\textbackslash{}").replace("&", "\\&").replace("%", "\\%")
            .replace("_", "\\_").replace("#", "\\#").replace("|", "$|$").replace("±", "$\\pm$"))


def render_latex(tables: list[Table]) -> str:
    parts = []
    for t in tables:
        head = _header(t)
        lines = ["\\begin{table}[t]", "\\centering", f"\\caption{{{_latex_escape(t.title)}}}",
                 "\\begin{tabular}{" + "l" * len(t.row_header) + "rr" * len(t.columns) + "}",
                 "\\toprule", " & ".join(_latex_escape(h) for h in head) + " \\\\", "\\midrule"]
        lines += [" & ".join(_latex_escape(c) for c in r) + " \\\\" for r in _body(t)]
        lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def render_csv(tables: list[Table]) -> str:
    """Long format: one line per (table, row, column) with the numbers unformatted."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["table", "row", "column", "ours_mean", "ours_std", "seeds", "profile", "paper", "note"])
    for t in tables:
        for labels, cells in t.rows:
            for col, c in zip(t.columns, cells):
                n = len(c.values)
                mean = f"{np.mean(c.values):.6f}" if n else ""
                std = f"{np.std(c.values, ddof=1):.6f}" if n > 1 else ""
                paper = "" if c.paper is None else c.paper
                note = c.na or c.data
                w.writerow([t.title.split(":")[0], " / ".join(labels), col, mean, std, n,
                            c.profile or "", paper, note])
    return buf.getvalue()


RENDERERS = {"md": render_markdown, "latex": render_latex, "csv": render_csv}


def build_tables(records: list[dict]) -> list[Table]:
    return [table1(records), table2(records), table3(records)]
