"""Crossed inputs are refused or recorded, never taken without a word: a checkpoint scored on
another kind of data than it was trained on, Geo+'s Geo pairs that are DATA itself or of another
side, a dataset of another motion in the tables."""
import json

import pytest
from click.testing import CliRunner

from benchmark import records
from benchmark.cli import main as flowbench
from benchmark.runner import trained_variant
from flowcaps.cli import main as flowcaps
from tests.test_flowcaps_train import tiny_config


@pytest.fixture(scope="module")
def tiny_articulated(tmp_path_factory):
    from geogen.make import MakeConfig, make_dataset
    out = tmp_path_factory.mktemp("art") / "articulated"
    return make_dataset(MakeConfig(variant="articulated", n=16, val=2, test=8, size=32, seed=0,
                                   out=str(out), workers=1, shard_size=1000), progress=False)


@pytest.fixture(scope="module")
def geo64(tmp_path_factory):
    from geogen.make import MakeConfig, make_dataset
    out = tmp_path_factory.mktemp("geo64") / "geo"
    return make_dataset(MakeConfig(variant="geo", n=8, val=2, test=4, size=64, seed=0,
                                   out=str(out), workers=1, shard_size=1000), progress=False)


def test_a_checkpoint_is_scored_only_on_the_kind_of_data_it_was_trained_on(tiny_articulated,
                                                                          tiny_geo, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(tiny_config(tmp_path / "run", epochs=1, cpu_ranks=1).to_json())
    res = CliRunner().invoke(flowcaps, ["train", str(tiny_articulated), "--config", str(spec),
                                        "--quiet"])
    assert res.exit_code == 0, res.output
    ckpt = tmp_path / "run" / "model.pt"
    res = CliRunner().invoke(flowbench, ["run", "flowcaps", "--profile", "smoke", "--checkpoint",
                                         str(ckpt), "--data", str(tiny_geo),
                                         "--results", str(tmp_path / "records")])
    assert res.exit_code == 1, res.output
    assert f"{ckpt} was trained on articulated data; --dataset geo would file it as a geo " \
           f"record: pass --dataset articulated" in res.output
    assert not (tmp_path / "records").exists()


def test_the_training_variant_comes_from_the_meta_or_the_benchmarks_folder_name():
    assert trained_variant({"data_variant": ["geo+", "geo"], "data": "x"}) == "geo+"
    assert trained_variant({"data": "data/geoplus-quick+data/geo-quick"}) == "geo+"
    assert trained_variant({"data": "data/articulatedplus-gpu"}) == "articulated+"
    assert trained_variant({"data": "data/geo-quick"}) == "geo"
    assert trained_variant({"data": "/somewhere/mine"}) is None


@pytest.mark.parametrize("which", ["itself", "other side"])
def test_geo_pairs_mixed_in_must_be_another_dataset_of_the_same_side(tiny_geo, geo64, tmp_path,
                                                                     which):
    spec = tmp_path / "spec.json"
    mix = tiny_geo if which == "itself" else geo64
    spec.write_text(tiny_config(tmp_path / "run", epochs=1, cpu_ranks=1,
                                mix_data=str(mix)).to_json())
    res = CliRunner().invoke(flowcaps, ["train", str(tiny_geo), "--config", str(spec), "--quiet"])
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1, res.output
    says = ("is DATA itself: every pair would train twice" if which == "itself"
            else f"{geo64} holds 64 px pairs but the model is 32 px")
    assert says in res.output
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_a_record_of_another_motion_is_named_and_left_out_of_the_tables(tmp_path):
    src = records.COMMITTED / "geo" / "flowcaps" / "long" / "seed0.json"
    rec = json.loads(src.read_text())
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "plain.json").write_text(json.dumps(rec))
    rec["data"]["motion"], rec["seed"] = "conformal", 5
    (tmp_path / "a" / "conformal.json").write_text(json.dumps(rec))
    kept, problems = records.load_records(tmp_path / "a")
    assert [r["_path"].endswith("plain.json") for r in kept] == [True]
    assert len(problems) == 1 and "conformal motion" in problems[0]
