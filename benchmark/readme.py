"""The tables' text as `flowbench table` prints it, and the README block that holds a copy.

The README's Results section is that text for the committed records (the tables without their
notes, which `flowbench table` prints), between two marker lines;
`flowbench table --readme README.md` writes it there and a test checks it is current, so a
record that changes without the README being regenerated fails the suite.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from benchmark.errors import BenchmarkError

BEGIN = "<!-- tables:begin -->"
END = "<!-- tables:end -->"


def tables_text(roots: list[Path], fmt: str = "md", profile: str | None = None,
                warn: Callable[[str], None] = lambda _: None, notes: bool = True) -> str:
    """Tables 1-3 from the records under `roots` (later roots shadow earlier ones' runs), each
    skipped file passed to `warn`; `notes=False`: the README's markdown, its notes left to
    `flowbench table`."""
    from benchmark.records import load_records
    from benchmark.render import RENDERERS, render_markdown
    from benchmark.tables import build_tables
    records, problems = load_records(roots)
    for p in problems:
        warn(f"skipped: {p}")
    tables = build_tables(records, profile=profile)
    return RENDERERS[fmt](tables) if notes else render_markdown(tables, notes=False)


def _span(text: str, where: str) -> tuple[int, int]:
    """Start and end of the text between the marker lines; BenchmarkError unless each marker
    is there once, on a line of its own, BEGIN first."""
    lines = text.splitlines(keepends=True)
    found = {m: [i for i, line in enumerate(lines) if line.strip() == m] for m in (BEGIN, END)}
    if any(len(v) != 1 for v in found.values()) or found[BEGIN][0] > found[END][0]:
        raise BenchmarkError(f"{where} needs one line {BEGIN} and, after it, one line {END}")
    start = sum(len(line) for line in lines[:found[BEGIN][0] + 1])
    end = sum(len(line) for line in lines[:found[END][0]])
    return start, end


def block(text: str, where: str = "the README") -> str:
    """The text between the markers."""
    start, end = _span(text, where)
    return text[start:end]


def with_block(text: str, tables: str, where: str = "the README") -> str:
    """`text` with the block between its markers replaced by `tables`."""
    start, end = _span(text, where)
    return text[:start] + tables + ("" if tables.endswith("\n") else "\n") + text[end:]
