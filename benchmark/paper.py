"""The paper's numbers (benchmark/data/paper.json), looked up by table, dataset, method, row.

Each cell carries its source (table and row). A cell whose number was not
transcribed holds null and prints as "?"; nothing here is ever estimated.
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


@lru_cache(maxsize=1)
def paper_cells() -> dict[tuple[int, str, str, str], PaperCell]:
    """All cells keyed by (table, dataset, method, row)."""
    text = resources.files("benchmark").joinpath("data/paper.json").read_text()
    try:
        raw = json.loads(text)["cells"]
    except (json.JSONDecodeError, KeyError) as err:
        raise BenchmarkError(f"benchmark/data/paper.json is damaged: {err}") from None
    cells = [PaperCell(**c) for c in raw]
    return {(c.table, c.dataset, c.method, c.row): c for c in cells}


def paper_value(table: int, dataset: str, method: str, row: str) -> float | None:
    """The paper's number for a cell, None where the cell is not transcribed or absent."""
    cell = paper_cells().get((table, dataset, method, row))
    return cell.value if cell else None


def paper_source() -> str:
    text = resources.files("benchmark").joinpath("data/paper.json").read_text()
    return json.loads(text)["paper"]
