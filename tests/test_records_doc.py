"""docs/records.md is what `flowbench records` writes from the committed records."""
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from benchmark.cli import main
from benchmark.records import COMMITTED
from benchmark.records_doc import REGENERATE, records_text

REPO = Path(__file__).resolve().parents[1]
DOC = Path("docs") / "records.md"


def test_records_doc_is_what_the_command_writes(monkeypatch):
    monkeypatch.chdir(REPO)
    assert (REPO / DOC).read_text() == records_text(COMMITTED), \
        f"docs/records.md is stale: run `{REGENERATE}`"


def test_a_changed_record_changes_the_page_and_the_command_writes_it(tmp_path, monkeypatch):
    shutil.copytree(REPO / COMMITTED, tmp_path / COMMITTED)
    monkeypatch.chdir(tmp_path)
    rec_path = COMMITTED / "geo" / "flowcaps" / "long" / "seed0.json"
    rec = json.loads(rec_path.read_text())
    before = records_text(COMMITTED)
    entry = before.split("#### `geo/flowcaps/long/seed0.json`")[1].split("####")[0]
    assert f"amodal IoU {rec['metrics']['amodal_iou']['all']:.3f}" in entry
    assert f"`{rec['git']['commit'][:7]}`" in entry and rec["command"] in entry
    assert rec["checkpoint"] in entry and rec["checkpoint_sha256"] in entry
    rec["metrics"]["amodal_iou"]["all"] = 0.5
    rec_path.write_text(json.dumps(rec))
    res = CliRunner().invoke(main, ["records", "-o", "records.md"])
    assert res.exit_code == 0, res.output
    after = Path("records.md").read_text()
    assert after != before and after == records_text(COMMITTED)
    assert "amodal IoU 0.500" in after.split("#### `geo/flowcaps/long/seed0.json`")[1]


def test_the_page_names_no_method_of_its_own(tmp_path, monkeypatch, register_toy):
    """Registry-agnostic: a record of any registered method gets its entry from its fields
    alone."""
    register_toy(name="somemethod")
    src = REPO / COMMITTED / "geo" / "flowcaps" / "long" / "seed0.json"
    rec = json.loads(src.read_text())
    rec.update(method="somemethod", checkpoint=None, checkpoint_sha256=None)
    rec["config"]["trained_with"] = None
    dest = tmp_path / "geo" / "somemethod" / "long" / "seed0.json"
    dest.parent.mkdir(parents=True)
    dest.write_text(json.dumps(rec))
    text = records_text(tmp_path)
    assert "### somemethod, long" in text and "#### `geo/somemethod/long/seed0.json`" in text
    assert "- training:" not in text and "- checkpoint:" not in text
    code = (REPO / "benchmark" / "records_doc.py").read_text()
    assert not any(f'"{m}"' in code for m in ("flowcaps", "psd", "rnem", "scae"))
