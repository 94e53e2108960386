"""`flowbench ablate --jobs`: the grid's runs side by side, each in its own process."""
import json
from pathlib import Path

from benchmark.runner import RunRequest, ablation_requests, execute_all, plan


def test_runs_side_by_side_write_the_records_one_by_one_would(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = RunRequest(method="flowcaps", dataset="geo", profile="smoke", device="cpu",
                      make_data=True)
    plans = [plan(r) for r in ablation_requests(base)[:2]]  # the default run and K=4, |s|=11
    lines = []
    written = execute_all(plans, jobs=2, echo=lines.append)
    assert sorted(written) == sorted(p.targets[0] for p in plans)
    tags = {p.req.variant.tag() or "default" for p in plans}
    assert {line.split("]")[0][1:] for line in lines if line.startswith("[")} == tags
    axes = [json.loads(Path(p.targets[0]).read_text())["axes"] for p in plans]
    assert [a["num_capsules"] for a in axes] == [8, 4]
    assert Path("data/geo-smoke").is_dir()  # made once, by the parent, before the runs
