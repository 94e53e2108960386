"""The named profiles (each builds the config it built before) and the removed switches."""
import json
from pathlib import Path

import pytest
import torch

from benchmark import profiles as bench_profiles
from benchmark.registry import TrainSpec, get_method
import flowcaps
from flowcaps import FlowcapsError, FlowCapsules, ModelConfig, TrainConfig, checkpoint
from flowcaps import removed
from flowcaps.profiles import paper

ROOT = Path(__file__).resolve().parents[1]
# Each profile's config as `flowbench run flowcaps --dataset D --profile P` builds it (seed 0,
# device auto, run folder RUN, Geo+'s Geo pairs at MIX), written by the code before the defaults
# became the paper's and the last unused switches went. Refresh it only for a change on purpose.
EXPECTED = json.loads((ROOT / "tests" / "data" / "flowcaps_profile_configs.json").read_text())
CASES = [(d, p) for d in ("geo", "geo+") for p in ("smoke", "quick", "long", "gpu", "paper")]


def _without_removed(raw: dict) -> dict:
    """The expectation less the switches removed since (each must sit at its off value)."""
    out = removed.drop(raw, removed.TRAIN_FIELDS)
    out["model"] = removed.drop(raw["model"], removed.MODEL_FIELDS, "model.")
    return out


def _spec(dataset: str, profile: str) -> TrainSpec:
    return TrainSpec(dataset=dataset, profile=profile, seed=0, data_root=Path("DATA"),
                     run_dir=Path("RUN"), image_size=bench_profiles.get_profile(profile).size,
                     extra_data={"geo": Path("MIX")} if dataset == "geo+" else {})


@pytest.mark.parametrize("dataset,profile", CASES)
def test_each_profile_builds_the_config_it_built_before(dataset, profile):
    got = get_method("flowcaps").config(_spec(dataset, profile))
    assert json.loads(json.dumps(got)) == _without_removed(EXPECTED[dataset][profile])


def test_the_paper_profile_is_the_configs_defaults():
    assert paper(out="x") == TrainConfig(out="x")
    base = paper(out="x")
    assert (base.lr, base.epochs, base.w_center, base.w_smooth) == (1e-4, 150, 1e-2, 1e-4)
    assert (base.model.num_capsules, base.model.capsule_dim) == (8, 32)
    assert (base.model.translation_head, base.model.background) == ("fc", "uniform")
    assert (base.blur_sigmas, base.both_directions, base.center_form) == ((0.0,), False, "spread")


def _saved(config_changes: dict, model_changes: dict) -> str:
    raw = json.loads(TrainConfig().to_json())
    raw.update(config_changes)
    raw["model"].update(model_changes)
    return json.dumps(raw)


def test_removed_switches_load_only_at_their_off_value():
    every_off = _saved(removed.TRAIN_FIELDS, removed.MODEL_FIELDS)
    assert TrainConfig.from_json(every_off) == TrainConfig()
    for key in removed.TRAIN_FIELDS:
        on = {"blur_fade": 0.5, "w_consistency": 3.0, "w_segment": 1.0, "overlap_start": 0.4,
              "occlusion_aware": True, "edge_source": "difference", "w_layers": 1.0,
              "window_ramp": 0.5, "w_distinct": 0.01, "distinct_margin": 0.9, "w_overlap": 0.05,
              "overlap_tau": 2.0}[key]
        with pytest.raises(FlowcapsError, match=f"{key}={on!r}, a switch that was removed"):
            TrainConfig.from_json(_saved({key: on}, {}))
    for key in removed.MODEL_FIELDS:
        on = {"heat_offset": 0.15, "depth_code": "capsule", "mask_reading": "logit",
              "heat_block": -1, "enc_extra_convs": 1, "heat_window": 2,
              "enc_norm_kind": "batch", "split_first_layer": False}[key]
        with pytest.raises(FlowcapsError, match=f"model.{key}={on!r}, a switch that was removed"):
            TrainConfig.from_json(_saved({}, {key: on}))
    # a removed value of a kept switch is refused by validation
    with pytest.raises(FlowcapsError, match="translation_head"):
        TrainConfig.from_json(_saved({}, {"translation_head": "segment"})).validate()
    with pytest.raises(FlowcapsError, match="center_form"):
        TrainConfig.from_json(_saved({"center_form": "centroid"}, {})).validate()


def test_a_checkpoint_with_a_removed_switch_on_is_refused_in_one_line(tmp_path):
    cfg = TrainConfig(model=ModelConfig(image_size=16, enc_channels=(4,), enc_hidden=8,
                                        dec_hidden=8, num_capsules=2, capsule_dim=6))
    path = checkpoint.save(tmp_path / "m.pt", cfg, FlowCapsules(cfg.model))
    blob = torch.load(path, weights_only=True)
    raw = json.loads(blob["config"])
    raw["model"]["depth_code"] = "capsule"
    blob["config"] = json.dumps(raw)
    torch.save(blob, path)
    with pytest.raises(FlowcapsError) as err:
        flowcaps.load(path)
    assert "\n" not in str(err.value) and "model.depth_code='capsule'" in str(err.value)


@pytest.mark.parametrize("path", sorted((ROOT / "checkpoints").glob("flowcaps_*.pt")),
                         ids=lambda p: p.name)
def test_committed_checkpoints_carry_removed_switches_off_and_load(path):
    raw = json.loads(checkpoint.read(path)["config"])
    # a checkpoint written before a switch was removed carries it, at its off value
    assert all(raw.get(key, off) == off for key, off in removed.TRAIN_FIELDS.items())
    assert all(raw["model"].get(key, off) == off for key, off in removed.MODEL_FIELDS.items())
    model = flowcaps.load(path)
    assert model.config == checkpoint.config_of(checkpoint.read(path)).model
