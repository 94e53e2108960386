"""The tables as text: markdown (the README's block), LaTeX and long-format csv.

All three print the same cells of benchmark.tables (Table 1's: "fixed / per image"); the csv
gives each number in a column of its own (the fixed assignment's in `ours_mean`, the per-image
one's in `ours_per_image_mean`, the ceiling) and adds the record files.
"""
from __future__ import annotations

import csv
import io

import numpy as np

from benchmark.tables import AMODAL_MARK, GT_MARK, Table


def _header(t: Table) -> list[str]:
    return t.row_header + [h for c in t.columns for h in (f"{c} ({t.ours})", f"{c} (paper)")]


def _body(t: Table) -> list[list[str]]:
    return [list(labels) + [s for c in cells for s in (c.ours(), c.theirs())]
            for labels, cells in t.rows]


LEGEND = ("ours: mean ± std over seeds (profile, seeds), from the result records "
          "(results/records; \"local\": your own runs in runs/records, in rows of their own, "
          "never averaged with the committed records); in Table 1, for every method, "
          "\"fixed / per image\": the score with one capsule per part over the whole test set, "
          "then with capsules matched to parts in each image (benchmark/metrics.py); "
          "paper: Sabour et al., ICML 2021 (benchmark/data/paper.json); "
          "- = no run yet; n/r = the paper reports no number.")


# The README's copy leaves the notes to `flowbench table`: a reader's first screen, not the record.
README_LEGEND = ("ours: mean ± std over seeds (profile, seeds); Table 1: fixed / per image "
                 "assignment;\n"
                 f"{AMODAL_MARK} visible-only masks (Table 1a: their ceiling); {GT_MARK} sees the "
                 "true flow at test time;\n"
                 "`flowbench table` prints every note and the runs that fill the - cells.")


def render_markdown(tables: list[Table], notes: bool = True) -> str:
    """The tables in markdown; without `notes` (the README's copy) a short legend and the
    tables alone."""
    parts = [LEGEND if notes else README_LEGEND]
    for t in tables:
        head = [h.replace("|", "\\|") for h in _header(t)]
        lines = [f"**{t.title}**", "", "| " + " | ".join(head) + " |",
                 "|" + "|".join("---" for _ in head) + "|"]
        # A bare "|" (as in |s|) would split a markdown cell.
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in _body(t)]
        if notes and t.notes:
            lines += [""] + t.notes
        if notes and t.missing:
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
                "ours_per_image_mean", "ceiling", "note", "records"])
    for t in tables:
        for labels, cells in t.rows:
            for col, c in zip(t.columns, cells):
                n = len(c.values)
                mean = f"{np.mean(c.values):.6f}" if n else ""
                std = f"{np.std(c.values, ddof=1):.6f}" if n > 1 else ""
                per_image = f"{np.mean(c.per_image):.6f}" if c.per_image else ""
                ceiling = f"{c.ceiling:.6f}" if c.ceiling is not None else ""
                paper = c.paper if c.paper is not None else ("" if c.paper_text in ("", "?")
                                                             else c.paper_text)
                note = "; ".join(x for x in (c.na, "ceiling" if ceiling else "",
                                             "local" if c.local else "") if x)
                w.writerow([t.title.split(":")[0], " / ".join(labels), col, mean, std, n,
                            c.profile or "", paper, per_image, ceiling, note,
                            " ".join(c.sources)])
    return buf.getvalue()


RENDERERS = {"md": render_markdown, "latex": render_latex, "csv": render_csv}
