"""The README's tables are what `flowbench table` prints from the committed records."""
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from benchmark.cli import main
from benchmark.readme import BEGIN, END, block, tables_text, with_block
from benchmark.records import COMMITTED

REPO = Path(__file__).resolve().parents[1]
REGENERATE = "flowbench table --readme README.md"


def test_readme_tables_are_the_committed_records_tables(monkeypatch):
    monkeypatch.chdir(REPO)  # COMMITTED is relative: records elsewhere would read as "local"
    readme = block((REPO / "README.md").read_text())
    assert readme == tables_text([COMMITTED]), f"README.md's tables are stale: run `{REGENERATE}`"


def test_a_changed_record_fails_the_check_until_the_readme_is_regenerated(tmp_path, monkeypatch):
    shutil.copytree(REPO / COMMITTED, tmp_path / COMMITTED)
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    monkeypatch.chdir(tmp_path)  # the copy is the committed tree there
    readme = Path("README.md")
    assert block(readme.read_text()) == tables_text([COMMITTED])
    rec_path = COMMITTED / "geo" / "flowcaps" / "long" / "seed0.json"
    rec = json.loads(rec_path.read_text())
    assert f"{rec['metrics']['amodal_iou']['all']:.3f}" == "0.955"
    rec["metrics"]["amodal_iou"]["all"] = 0.5
    rec_path.write_text(json.dumps(rec))
    assert block(readme.read_text()) != tables_text([COMMITTED])

    before = readme.read_text()
    res = CliRunner().invoke(main, ["table", "--readme", "README.md"])
    assert res.exit_code == 0, res.output
    after = readme.read_text()
    assert block(after) == tables_text([COMMITTED])
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

