"""`benchmark.datasets.ensure` with two makers at once, ablate's data made before its jobs, and
the Table 1 targets a manifest gives."""
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark import runner
from benchmark.runner import RunRequest, execute_all, plan
from geogen import shards

# One maker of a missing folder: geogen's make_dataset is slowed by a second, so the other
# process looks for the folder while this one makes it. Both wait at a barrier of marker files
# first, so they ask for the folder at the same moment.
MAKER = r"""
import sys, time
from pathlib import Path
import geogen.make
from benchmark import datasets
from geogen import shards

root, ready, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
real = geogen.make.make_dataset
def slow(*args, **kwargs):
    time.sleep(1.0)
    return real(*args, **kwargs)
geogen.make.make_dataset = slow
cfg = datasets.make_config("geo", root, n=24, val=0, test=8, size=32)  # smoke's 32 px, tiny
(ready / name).touch()
while len(list(ready.iterdir())) < 2:
    time.sleep(0.005)
datasets.ensure(cfg, root, may_make=True, own_folder=True, progress=False, echo=print)
print("whole" if shards.verify(root) == [] else "broken", flush=True)
"""


def test_two_processes_make_a_missing_folder_once_and_both_find_it_whole(tmp_path):
    root, ready = tmp_path / "data" / "geo-tiny", tmp_path / "ready"
    ready.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", MAKER, str(root), str(ready), name],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("a", "b")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    lines = [line for out, _ in outs for line in out.splitlines()]
    assert sum(line.startswith("making geo in") for line in lines) == 1, lines
    assert [out.splitlines()[-1] for out, _ in outs] == ["whole", "whole"]
    assert shards.verify(root) == []
    assert (root.parent / ".geo-tiny.lock").is_file()  # the lock sits beside the folder


def test_ablate_makes_every_folder_before_its_jobs_start(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    # Longer clips and another dataset's pairs: three folders per run, none there yet.
    toy = register_toy(trains_with={"geo+": ("geo",)}, clip_frames=3)
    plans = [plan(RunRequest(method=toy.name, dataset="geo+", profile="smoke", seeds=(s,)))
             for s in (0, 1)]
    folders = [Path("data/geoplus-smoke"), Path("data/geoplus-smoke-t3"),
               Path("data/geo-smoke-t3")]
    assert [f.root for f in plans[0].folders()] == folders
    assert not Path("data").exists()
    started = []

    def jobs(plans_, n, echo):  # stands in for the process pool
        started.append([(f / "manifest.json").is_file() for f in folders])
        return []

    monkeypatch.setattr(runner, "_run_parallel", jobs)
    lines = []
    execute_all(plans, jobs=2, echo=lines.append)
    assert started == [[True, True, True]]
    assert sum(line.startswith("making") for line in lines) == 3  # each folder once


def test_articulated_table1_targets_are_whole_limbs_from_the_manifest():
    from benchmark.datasets import targets
    from benchmark.errors import BenchmarkError
    from geogen.variants import get_variant
    manifest = {"variant": "articulated", **get_variant("articulated").manifest_entries}
    slots, groups = targets(manifest)
    assert len(slots) == 10 and list(groups) == ["torso", "left leg", "right leg"]
    assert [slots[i] for i in groups["left leg"]] == ["left_upper_leg", "left_lower_leg"]
    assert targets({"variant": "geo"}) == (("circle", "square", "triangle"), {})
    assert get_variant("geo").manifest_entries == {}   # Geo's manifests keep their bytes
    with pytest.raises(BenchmarkError, match="no group 'torso'"):
        targets({"variant": "articulated", "slots": list(slots)})
    plus = {"variant": "articulated+", **get_variant("articulated+").manifest_entries}
    assert targets(plus) == (slots, groups)  # the textured figures score the same parts


def test_a_geo_plus_folder_of_the_former_look_is_refused_for_a_paper_look_run(tmp_path):
    """The benchmark's own Geo+ folder made before geogen recorded looks (the camouflage look)
    is not trained or scored as the paper's Geo+: one line, as for other settings; a folder
    the user names is taken as it is (its record notes the look)."""
    import json

    from benchmark import datasets
    from benchmark.errors import BenchmarkError
    from geogen.make import make_dataset
    cfg = datasets.make_config("geo+", tmp_path / "gp", n=4, val=0, test=2, size=32)
    assert cfg.look == "paper"
    old = datasets.make_config("geo+", tmp_path / "gp", n=4, val=0, test=2, size=32,
                               look="camouflage")
    root = make_dataset(old, progress=False)
    with pytest.raises(BenchmarkError, match=r"holds geo\+ in the camouflage look, this run "
                                             r"needs the paper look; move that folder away"):
        datasets.ensure(cfg, root, may_make=True, own_folder=True)
    manifest = json.loads((root / "manifest.json").read_text())
    del manifest["config"]["look"]  # as every Geo+ folder made before looks were recorded
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BenchmarkError, match=r"camouflage look \(made before geogen recorded "
                                             r"looks\), this run needs the paper look"):
        datasets.ensure(cfg, root, may_make=True, own_folder=True)
    assert datasets.ensure(cfg, root, may_make=False, own_folder=False) == root
    assert datasets.ensure(old, root, may_make=False, own_folder=True) == root
    assert runner._look_entry(manifest) == {"look": "camouflage"}
    assert runner._look_entry({"variant": "geo", "config": {}}) == {}
