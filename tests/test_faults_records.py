"""Records are read against a schema: a record whose fields are of the wrong kind, of a method
this flowbench does not know or with a metric that is not a finite number is skipped and named,
and the tables of the good records print as before."""
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmark.cli import main

GOOD = Path(__file__).resolve().parents[1] / "results" / "records" / "geo" / "flowcaps" / "long" / "seed0.json"


@pytest.mark.parametrize("change, says", [
    ({"metrics": "oops"}, "metrics is str 'oops'"),
    ({"variant": [1, 2]}, "variant is list [1, 2]"),
    ({"data": "str"}, "data is str 'str'"),
    ({"seed": "0"}, "seed is str '0'"),
    ({"method": "nomethod"}, "method 'nomethod' is not one this flowbench knows"),
    ({"dataset": "mnist"}, "dataset 'mnist' is not one of"),
    ({"metrics.amodal_iou": {"all": "high"}}, "metrics.amodal_iou.all is 'high', not a number"),
    ({"metrics.amodal_iou": {"all": float("nan")}}, "metrics.amodal_iou.all is nan"),
])
def test_a_malformed_record_is_skipped_by_name_and_the_rest_print(tmp_path, change, says):
    good = json.loads(GOOD.read_text())
    bad = json.loads(GOOD.read_text())
    for key, value in change.items():
        if key.startswith("metrics."):
            bad["metrics"][key.split(".", 1)[1]] = value
        else:
            bad[key] = value
    bad["seed"] = bad["seed"] if "seed" in change else 7
    (tmp_path / "a").mkdir()
    shutil.copy(GOOD, tmp_path / "a" / "good.json")
    (tmp_path / "a" / "bad.json").write_text(json.dumps(bad))
    res = CliRunner().invoke(main, ["table", "--results", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output and ",nan" not in res.output
    skipped = [line for line in res.stderr.splitlines() if line.startswith("skipped:")]
    assert len(skipped) == 1 and "bad.json" in skipped[0] and says in skipped[0], res.stderr
    alone = CliRunner().invoke(main, ["table", "--results", str(tmp_path / "a"),
                                                      "--format", "csv"])
    (tmp_path / "a" / "bad.json").unlink()
    clean = CliRunner().invoke(main, ["table", "--results", str(tmp_path / "a"),
                                                      "--format", "csv"])
    cells = [line for line in alone.output.splitlines() if not line.startswith("skipped:")]
    assert cells == clean.output.splitlines()  # the good record's cells, as without the bad one
    assert good["metrics"]["amodal_iou"]["all"] > 0
