"""A method added in tests/toy_method.py (its package and adapter in one module) and registered
with `register` alone is listed, benched, trained, evaluated and checked by the suites
parametrised over the registry: no list of methods is kept anywhere else.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmark import bench
from benchmark.cli import main
from benchmark.registry import METHODS, register, unregister
from toy_method import NAME, ToyLoopMethod

TESTS = Path(__file__).resolve().parent
# The suites that take every registered method as a parameter, and so must take the toy.
REGISTRY_SUITES = ("tests/test_trainloop_methods.py", "tests/test_registry_contract.py")


@pytest.fixture
def toy():
    register(ToyLoopMethod)
    yield METHODS[NAME]
    unregister(NAME)


def test_list_shows_the_toy_with_its_budget(toy):
    res = CliRunner().invoke(main, ["list"])
    assert res.exit_code == 0, res.output
    assert f"  {NAME:16s} {toy.title}\n" in res.output
    assert f"quick: {toy.budgets['quick']}" in res.output


def test_the_bench_measures_the_toy(toy, tmp_path, monkeypatch):
    assert list(bench.benched())[-1] == NAME  # the registry's order: registered last
    monkeypatch.setattr(bench, "matmul_peak", lambda threads: 1.0)  # seconds of big matmuls
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(main, ["bench", "--profile", "smoke", "--steps", "1", "--method",
                                    NAME, "--out", str(out)])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(out.read_text())["rows"]
    assert row["method"] == NAME and row["unit"] == "images" and row["mflop_per_row"] > 0
    assert "as_trained" not in row


def test_flowbench_run_trains_and_scores_the_toy(toy, tiny_geo, tmp_path, monkeypatch):
    """The smoke profile on the tests' tiny Geo set (16 test pairs, not the profile's 60: a
    partial record, named so)."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["run", NAME, "--profile", "smoke", "--data", str(tiny_geo)])
    assert res.exit_code == 0, res.output
    record = json.loads(Path("runs/records/geo", NAME, "smoke/seed0-test16.json").read_text())
    assert record["method"] == NAME and 0.0 <= record["metrics"]["visible_iou"]["all"] <= 1.0
    log = Path("runs/flowbench", f"{NAME}_geo_smoke_seed0", "log.csv").read_text().splitlines()
    assert log[0].startswith("step,epoch,images,") and len(log) == 1 + 20 // 5  # the loop's log


def test_the_registry_suites_check_the_toy_like_every_method():
    """Those suites run in a session that loads tests/toy_method.py as a plugin (registering the
    toy before collection): each of their tests parametrised by method runs for it and passes."""
    expected = {f"{suite}::{test}[{NAME}]" for suite in REGISTRY_SUITES
                for test in re.findall(r'^@pytest\.mark\.parametrize\("name", .*\)\ndef (test_\w+)',
                                       (TESTS.parent / suite).read_text(), re.M)}
    assert len(expected) >= 7  # 4 loop checks, 3 contract checks
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    out = subprocess.run([sys.executable, "-m", "pytest", *REGISTRY_SUITES, "-p", "toy_method",
                          "-p", "no:cacheprovider", "-k", NAME, "-rA"],
                         cwd=TESTS.parent, env=env, capture_output=True, text=True)
    passed = set(re.findall(rf"^PASSED (\S+\[{NAME}\])$", out.stdout, re.M))
    assert out.returncode == 0 and passed == expected, out.stdout[-3000:] + out.stderr[-2000:]
