"""The README's tables are what `flowbench table` prints from the committed records."""
import csv
import io
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from benchmark.cli import main
from benchmark.readme import BEGIN, END, block, tables_text, with_block
from benchmark.records import COMMITTED, file_sha256

REPO = Path(__file__).resolve().parents[1]
REGENERATE = "flowbench table --readme README.md"


def test_readme_tables_are_the_committed_records_tables(monkeypatch):
    monkeypatch.chdir(REPO)  # COMMITTED is relative: records elsewhere would read as "local"
    readme = block((REPO / "README.md").read_text())
    assert readme == tables_text([COMMITTED], notes=False), (
        f"README.md's tables are stale: run `{REGENERATE}`")


def test_a_changed_record_fails_the_check_until_the_readme_is_regenerated(tmp_path, monkeypatch):
    shutil.copytree(REPO / COMMITTED, tmp_path / COMMITTED)
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    monkeypatch.chdir(tmp_path)  # the copy is the committed tree there
    readme = Path("README.md")
    assert block(readme.read_text()) == tables_text([COMMITTED], notes=False)
    rec_path = COMMITTED / "geo" / "flowcaps" / "long" / "seed0.json"
    rec = json.loads(rec_path.read_text())
    assert f"{rec['metrics']['amodal_iou']['all']:.3f}" == "0.955"
    rec["metrics"]["amodal_iou"]["all"] = 0.5
    rec_path.write_text(json.dumps(rec))
    assert block(readme.read_text()) != tables_text([COMMITTED], notes=False)

    before = readme.read_text()
    res = CliRunner().invoke(main, ["table", "--readme", "README.md"])
    assert res.exit_code == 0, res.output
    after = readme.read_text()
    assert block(after) == tables_text([COMMITTED], notes=False)
    assert "| Geo | all |" in block(after) and "0.500 (long)" in block(after)
    # Only the block changed: the text around the markers is as it was.
    head, tail = before.split(BEGIN)[0], before.split(END)[1]
    assert after.startswith(head + BEGIN) and after.endswith(END + tail)


def test_with_block_keeps_the_rest_and_bad_markers_are_one_line_errors(tmp_path, monkeypatch):
    text = f"intro\n{BEGIN}\nold\n{END}\nafter\n"
    assert with_block(text, "new\n") == f"intro\n{BEGIN}\nnew\n{END}\nafter\n"
    assert block(with_block(text, "new")) == "new\n"
    monkeypatch.chdir(REPO)
    runner = CliRunner()
    for bad in (f"{END}\n{BEGIN}\n", f"{BEGIN}\nonly one\n", f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n"):
        path = tmp_path / "R.md"
        path.write_text(bad)
        res = runner.invoke(main, ["table", "--readme", str(path)])
        assert res.exit_code == 1 and "needs one line" in res.output, res.output
        assert "Traceback" not in res.output and path.read_text() == bad
    res = runner.invoke(main, ["table", "--readme", str(path), "--format", "csv"])
    assert res.exit_code == 1 and "--readme writes markdown" in res.output



KEPT = REPO / "tests" / "data" / "tables_kept_records"  # .csv and .sha256


CAMOUFLAGE = "Geo+ (camouflage)"


def _camouflaged(key: tuple[str, str, str]) -> tuple[str, str, str]:
    """Where a Geo+ cell of the kept csv is now: (table, row, column)."""
    table, row, column = key
    if row.startswith("Geo+ / "):
        row = CAMOUFLAGE + row[len("Geo+"):]
    if column == "Geo+" or column.startswith("Geo+ N="):
        column = CAMOUFLAGE + column[len("Geo+"):]
    return table, row, column


def _camouflaged_cell(key: tuple[str, str, str], cell: dict[str, str]) -> dict[str, str]:
    moved = _camouflaged(key) != key
    return {**cell, **({"row": _camouflaged(key)[1], "column": _camouflaged(key)[2],
                        "paper": ""} if moved else {})}


def _cells(text: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """Cells by (table, row, column). Table 3's rows have since gained a second label, how their
    masks were scored (`ROW / RULE` in the csv): a label, not a cell, so the row is its first."""
    rows = list(csv.DictReader(io.StringIO(text)))
    for r in rows:
        if r["table"] == "Table 3":
            r["row"] = r["row"].split(" / ")[0]
    return {(r["table"], r["row"], r["column"]): r for r in rows}


def test_the_kept_records_cells_are_what_the_former_table_code_made_of_them(tmp_path,
                                                                           monkeypatch):
    """The records that stayed under results/records when those of the former segmentation rule
    and 4 x 4 data moved out (2026-12-07) fill the same cells as before: KEPT.csv is what
    `flowbench table --format csv` printed from exactly those records (KEPT.sha256) with the
    code of that time (commit b5c0ccb), changed once on purpose since: R-NEM's Table 1b cells
    show the fixed assignment like every method's (`ours_mean`, `ours_std`; its column no
    longer marked ¶), its per-image number unchanged in `ours_per_image_mean`. A kept record
    replaced since is left out, and with it every cell it fed; every other cell must match
    field for field."""
    kept = dict(line.split()[::-1] for line in KEPT.with_suffix(".sha256").read_text()
                .splitlines())  # path -> sha256
    same = [p for p, sha in kept.items()
            if (REPO / p).is_file() and file_sha256(REPO / p) == sha]
    for p in same:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / p, tmp_path / p)
    monkeypatch.chdir(tmp_path)  # the copy is the committed tree there
    # Those Geo+ records were made on the look now called camouflage: their cells moved to the
    # "Geo+ (camouflage)" rows and columns, without the paper's numbers (not its data).
    before = {_camouflaged(key): _camouflaged_cell(key, cell)
              for key, cell in _cells(KEPT.with_suffix(".csv").read_text()).items()}
    after = _cells(tables_text([COMMITTED], fmt="csv"))
    rows = {key[:2] for key in after}
    compared = 0
    for key, cell in before.items():
        sources = set(cell["records"].split())
        if not sources <= set(same) or (not sources and key[:2] not in rows):
            continue  # a replaced record fed it; or a row only records since replaced open
        assert after.get(key) == cell, key
        compared += bool(sources)
    assert compared >= len(same)  # cells made of the kept records were compared
