"""The paper's numbers (benchmark/data/paper.json), looked up by table, dataset, method, row.

Each cell carries its source. A cell whose value is null is one the paper reports no number for
(its note says why; the tables print "n/r"); a cell missing from the file would print "?" (a
test keeps every number of the paper's tables in the file). Nothing here is ever estimated.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from benchmark.errors import BenchmarkError


@dataclass(frozen=True)
class PaperCell:
    table: int
    dataset: str
    method: str
    row: str
    value: float | None
    source: str
    note: str = ""


@dataclass(frozen=True)
class PaperNumber:
    """A number the paper's text states beside a table (not a table cell)."""

    table: int
    what: str
    value: float
    source: str


@lru_cache(maxsize=1)
def _raw() -> dict:
    text = resources.files("benchmark").joinpath("data/paper.json").read_text()
    try:
        raw = json.loads(text)
        raw["cells"], raw["text"]
    except (json.JSONDecodeError, KeyError) as err:
        raise BenchmarkError(f"benchmark/data/paper.json is damaged: {err}") from None
    return raw


@lru_cache(maxsize=1)
def paper_cells() -> dict[tuple[int, str, str, str], PaperCell]:
    """All cells keyed by (table, dataset, method, row)."""
    cells = [PaperCell(**c) for c in _raw()["cells"]]
    return {(c.table, c.dataset, c.method, c.row): c for c in cells}


def paper_cell(table: int, dataset: str, method: str, row: str) -> PaperCell | None:
    """The paper's cell, None where the file has none (a method or row the paper lacks)."""
    return paper_cells().get((table, dataset, method, row))


def paper_value(table: int, dataset: str, method: str, row: str) -> float | None:
    """The paper's number for a cell, None where it has none."""
    cell = paper_cell(table, dataset, method, row)
    return cell.value if cell else None


def paper_text(table: int) -> list[PaperNumber]:
    """The numbers the text states beside a table."""
    return [PaperNumber(**t) for t in _raw()["text"] if t["table"] == table]


def paper_source() -> str:
    return _raw()["paper"]
