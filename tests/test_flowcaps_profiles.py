"""The named profiles (each builds the config it built before) and the removed switches."""
import dataclasses
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from benchmark import profiles as bench_profiles
from benchmark.registry import TrainSpec, get_method
import flowcaps
import flowcaps.cli
from flowcaps import FlowcapsError, FlowCapsules, ModelConfig, TrainConfig, checkpoint
from flowcaps import launch, removed
from flowcaps.config import LOOP, RENAMED
from flowcaps.profiles import BY_VARIANT, MIX_WITH, paper
from trainloop.configs import LOOP_FIELDS, nest_loop

ROOT = Path(__file__).resolve().parents[1]
# Each profile's config as `flowbench run flowcaps --dataset D --profile P` builds it (seed 0,
# device auto, run folder RUN, Geo+'s Geo pairs at MIX), written by the code before the defaults
# became the paper's and the last unused switches went. Refresh it only for a change on purpose.
EXPECTED = json.loads((ROOT / "tests" / "data" / "flowcaps_profile_configs.json").read_text())
CASES = [(d, p) for d in ("geo", "geo+") for p in ("smoke", "quick", "long", "gpu", "paper")]


def _without_removed(raw: dict) -> dict:
    """The expectation less the switches removed since (each must sit at its off value), its
    loop settings nested as configs hold them now (the values unchanged: `pairs` is
    `loop.rows`)."""
    out = removed.drop(raw, removed.TRAIN_FIELDS)
    out["model"] = removed.drop(raw["model"], removed.MODEL_FIELDS, "model.")
    assert not set(LOOP_FIELDS) - {"rows", "steps", "eval_every", "patience"} - set(out)
    return nest_loop(out, LOOP, RENAMED)


def _spec(dataset: str, profile: str) -> TrainSpec:
    return TrainSpec(dataset=dataset, profile=profile, seed=0, data_root=Path("DATA"),
                     run_dir=Path("RUN"), image_size=bench_profiles.get_profile(profile).size,
                     extra_data={"geo": Path("MIX")} if dataset == "geo+" else {})


@pytest.mark.parametrize("dataset,profile", CASES)
def test_each_profile_builds_the_config_it_built_before(dataset, profile):
    got = get_method("flowcaps").config(_spec(dataset, profile))
    assert json.loads(json.dumps(got)) == _without_removed(EXPECTED[dataset][profile])


def _data(folder: Path, variant: str, size: int) -> str:
    """A folder whose manifest names a variant and a side: all `flowcaps train` reads of DATA
    before training (which the tests below replace)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"variant": variant, "size": size}))
    return str(folder)


def _cli_config(monkeypatch, *args: str) -> TrainConfig:
    """The config `flowcaps train ARGS` hands to training."""
    seen = []
    monkeypatch.setattr(flowcaps.cli, "run_train", lambda cfg, data, progress, **kw: seen.append(cfg))
    monkeypatch.setattr(flowcaps.cli, "_trained", lambda path: "not trained (a test)")
    res = CliRunner().invoke(flowcaps.cli.main, ["train", *args])
    assert res.exit_code == 0, res.output
    return seen[0]


@pytest.mark.parametrize("dataset,profile", CASES)
def test_flowcaps_train_builds_what_flowbench_trains(tmp_path, monkeypatch, dataset, profile):
    size = bench_profiles.get_profile(profile).size
    args = [_data(tmp_path / "data", dataset, size), "--profile", profile, "--out", "RUN"]
    if dataset == "geo+":
        args += ["--mix-data", _data(tmp_path / "mix", "geo", size)]
    cfg = dataclasses.asdict(_cli_config(monkeypatch, *args))
    if dataset == "geo+":
        cfg["mix_data"] = "MIX"
    assert json.loads(json.dumps(cfg)) == _without_removed(EXPECTED[dataset][profile])


# A committed record of each recipe, with its checkpoint's training config (Geo's quick one
# moved out of results/records, scored under the former segmentation rule; its config stands).
RECORDS = ["experiments/2026-12-07-superseded-records/records/geo/flowcaps/quick/seed2.json",
           "results/records/geo/flowcaps/long/seed0.json",
           "results/records/geoplus/flowcaps/quick/seed2.json",
           "results/records/geoplus/flowcaps/long/seed0.json"]


@pytest.mark.parametrize("name", RECORDS)
def test_flowcaps_train_builds_the_records_config(tmp_path, monkeypatch, name):
    """What `flowcaps train DATA --profile P` trains is what the record's checkpoint trained
    with, as each of its CPU ranks saw it, in every field but the paths, seed, device, budget
    and precision."""
    record = json.loads((ROOT / name).read_text())
    trained = record["config"]["trained_with"]
    variant, profile = record["dataset"], record["profile"]
    args = [_data(tmp_path / "data", variant, 64), "--profile", profile]
    if variant == "geo+":
        args += ["--mix-data", _data(tmp_path / "mix", "geo", 64)]
    cfg = launch.per_rank_config(_cli_config(monkeypatch, *args), trained["meta"]["world_size"])
    want = TrainConfig.from_dict(trained["config"])  # keys added since take their off values
    # The records were budgeted in minutes, with bf16 "auto": the budget and the precision
    # fields are the profile's now (docs/deviations.md, "Budget and optimiser").
    paths = {"out": "x", "mix_data": None, "seed": 0, "device": "auto", "pairs": None,
             "max_minutes": None, "epochs": 1, "bf16": False}
    assert dataclasses.asdict(cfg.replace(**paths)) == dataclasses.asdict(want.replace(**paths))
    assert (cfg.mix_data is None) == (want.mix_data is None)


def test_the_paper_profile_is_the_configs_defaults():
    assert paper(out="x") == TrainConfig().replace(out="x")
    base = paper(out="x")
    assert (base.lr, base.loop.epochs, base.w_center, base.w_smooth) == (1e-4, 150, 1e-2, 1e-4)
    assert (base.model.num_capsules, base.model.capsule_dim) == (8, 32)
    assert (base.model.translation_head, base.model.background) == ("fc", "uniform")
    assert (base.blur_sigmas, base.both_directions, base.center_form) == ((0.0,), False, "centroid")
    assert (base.model.dec_depth, base.points, base.smooth_form) == (6, 0, "frame")


def test_a_saved_config_without_smooth_form_computes_smoothness_in_pixels_as_it_did():
    raw = json.loads(TrainConfig().to_json())
    del raw["smooth_form"]
    assert TrainConfig.from_json(json.dumps(raw)).smooth_form == "pixels"
    assert TrainConfig().smooth_form == "frame"  # the paper's, for configs built today
    with pytest.raises(FlowcapsError, match="smooth_form must be one of .*got 'px'"):
        TrainConfig().replace(smooth_form="px").validate()


def test_geoplus_data_needs_geo_pairs_to_mix_in(tmp_path, monkeypatch):
    plus = _data(tmp_path / "plus", "geo+", 64)
    res = CliRunner().invoke(flowcaps.cli.main, ["train", plus, "--profile", "quick"])
    assert res.exit_code == 1 and "pass --mix-data DIR" in res.output
    assert len(res.output.strip().splitlines()) == 1
    res = CliRunner().invoke(flowcaps.cli.main, ["train", plus, "--mix-data", plus])
    assert res.exit_code == 1 and "holds geo+ data; geo+ data's recipe mixes in geo" in res.output
    alone = _cli_config(monkeypatch, plus, "--set", "mix_first=0")  # Geo+ alone, on purpose
    assert (alone.mix_data, alone.mix_first, alone.model.enc_norm) == (None, 0.0, 8)
    for variant, differences in BY_VARIANT.items():  # each difference says why, in one line
        assert variant in MIX_WITH or "mix_first" not in differences
        assert all(why.strip() and "\n" not in why for _, why in differences.values())


def test_smoke_is_the_quick_profile_scaled_down():
    """The contract test trains the model family the quick profile trains, only smaller and
    shorter: every difference is a size or a cost."""
    smoke, quick = (dataclasses.asdict(flowcaps.PROFILES[n](out="x")) for n in ("smoke", "quick"))
    model = {k for k in quick["model"] if smoke["model"][k] != quick["model"][k]}
    assert model == {"enc_channels", "enc_hidden"}
    loop = {k for k in quick["loop"] if smoke["loop"][k] != quick["loop"][k]}
    assert loop == {"epochs", "rows", "batch_size", "threads", "checkpoint_minutes", "log_every"}
    train = {k for k in quick if k not in ("model", "loop") and smoke[k] != quick[k]}
    assert train == {"points", "smooth_points", "blur_sigmas", "both_directions", "warmup_steps",
                     "compile", "cpu_ranks"}
    assert smoke["cpu_ranks"] == 1 and not smoke["compile"] and smoke["loop"]["epochs"] <= 2


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
              "overlap_tau": 2.0, "mask_prior_anneal": 0.5, "low_res_until": 0.9,
              "clip_frames": 5, "w_usage": 0.01, "center_masks": "visible"}[key]
        with pytest.raises(FlowcapsError, match=f"{key}={on!r}, a switch that was removed"):
            TrainConfig.from_json(_saved({key: on}, {}))
    for key in removed.MODEL_FIELDS:
        on = {"heat_offset": 0.15, "depth_code": "capsule", "mask_reading": "logit",
              "heat_block": -1, "enc_extra_convs": 1, "heat_window": 2,
              "enc_norm_kind": "batch", "split_first_layer": False, "enc_separable": True,
              "enc_input_pool": 2, "enc_stem": "space_to_depth"}[key]
        with pytest.raises(FlowcapsError, match=f"model.{key}={on!r}, a switch that was removed"):
            TrainConfig.from_json(_saved({}, {key: on}))
    # a removed value of a kept switch is refused by validation
    with pytest.raises(FlowcapsError, match="translation_head"):
        TrainConfig.from_json(_saved({}, {"translation_head": "segment"})).validate()
    for form in ("variance_image",):  # "centroid" came back as the paper's form
        with pytest.raises(FlowcapsError, match=f"center_form must be one of .*got '{form}'"):
            TrainConfig.from_json(_saved({"center_form": form}, {})).validate()


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
