"""`flowcaps train` checks every option, the data, the run folder and --init before any
process starts: a bad one is one line and exit 1, and torchrun is never started."""
import dataclasses

import pytest
import torch
from click.testing import CliRunner

from flowcaps import FlowCapsules, TrainConfig, checkpoint, launch
from flowcaps.config import ModelConfig
from flowcaps.cli import main
from trainloop.configs import parse_text
from trainloop.loop import LoopConfig

from test_flowcaps_train import tiny_config


@pytest.fixture
def two_ranks(tmp_path, monkeypatch):
    """A config file of a 2-rank CPU run, and a launcher that fails the test if reached."""
    def started(*args, **kwargs):
        raise AssertionError("torchrun was started before the bad input was found")
    monkeypatch.setattr(launch, "launch", started)
    path = tmp_path / "two.json"
    path.write_text(tiny_config(tmp_path / "run", cpu_ranks=2).to_json())
    return path


def _refused(args, message):
    res = CliRunner().invoke(main, ["train", *args])
    assert res.exit_code == 1, res.output
    assert message in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


@pytest.mark.parametrize("sets, message", [
    (["lr=abc"], "lr must be a number, got 'abc'"),
    (["epochs=1.5"], "loop.epochs must be an integer or null, got 1.5"),
    (["both_directions=1"], "both_directions must be true or false, got 1"),
    (["blur_sigmas=[0, \"x\"]"], "blur_sigmas must be a list of numbers"),
    (["model.enc_channels=4"], "model.enc_channels must be a list of integers, got 4"),
    (["max_minutes=\"soon\""], "max_minutes must be a number or null"),
    (["max_minutes=0"], "max_minutes must be > 0"),
    (["max_pairs=0"], "max_pairs must be >= 1"),
    # torch's clip_grad_norm_ scales by max_norm / norm: a negative bound flips the gradient
    (["grad_clip=-1"], "grad_clip must be >= 0 (0 = off), got -1.0"),
    (["w_smooth=-1"], "w_smooth must be >= 0 (0 = off), got -1.0"),
    (["w_center=-0.01"], "w_center must be >= 0"),
    (["w_appearance=-1"], "w_appearance must be >= 0"),
    (["w_slow=-1"], "w_slow must be >= 0"),
])
def test_set_values_of_the_wrong_type_or_range_name_the_key(tiny_geo, two_ranks, sets, message):
    _refused([str(tiny_geo), "--config", str(two_ranks)] + [a for s in sets for a in ("--set", s)],
             message)


@pytest.mark.parametrize("minutes", ["-1", "0"])
def test_max_minutes_must_be_positive(tiny_geo, two_ranks, minutes):
    _refused([str(tiny_geo), "--config", str(two_ranks), "--max-minutes", minutes],
             "max_minutes must be > 0")


def test_a_bad_init_is_found_before_the_ranks_start(tiny_geo, two_ranks, tmp_path):
    args = [str(tiny_geo), "--config", str(two_ranks), "--init"]
    _refused(args + [str(tmp_path / "none.pt")], "does not exist")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    _refused(args + [str(junk)], "corrupt or not a torch file")
    other = tiny_config(tmp_path / "other", model={"num_capsules": 2})
    torch.manual_seed(0)
    checkpoint.save(tmp_path / "other.pt", other, FlowCapsules(other.model))
    _refused(args + [str(tmp_path / "other.pt")], "another model config (fields ['num_capsules'])")


def test_a_run_folder_it_cannot_resume_is_found_before_the_ranks_start(tiny_geo, two_ranks,
                                                                       tmp_path):
    cfg = TrainConfig.from_json(two_ranks.read_text())
    saved = launch.per_rank_config(cfg.replace(lr=0.5), 2)
    torch.manual_seed(0)
    checkpoint.save(tmp_path / "run" / "checkpoint.pt", saved, FlowCapsules(saved.model))
    _refused([str(tiny_geo), "--config", str(two_ranks)], "different config (fields ['lr'])")
    (tmp_path / "file").write_text("")
    _refused([str(tiny_geo), "--config", str(two_ranks), "--out", str(tmp_path / "file")],
             "exists and is not a folder")


def test_profile_and_config_together_are_refused(tiny_geo, two_ranks):
    _refused([str(tiny_geo), "--config", str(two_ranks), "--profile", "quick"],
             "--profile and --config both give the settings")
    res = CliRunner().invoke(main, ["train", "--help"])
    assert "not with --config" in res.output and "[default: quick]" in res.output


def test_a_config_file_of_the_wrong_types_is_refused(tiny_geo, two_ranks, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(two_ranks.read_text().replace('"lr": 0.001', '"lr": "fast"'))
    _refused([str(tiny_geo), "--config", str(bad)], "lr must be a number, got 'fast'")
    bad.write_text("[1, 2]")
    _refused([str(tiny_geo), "--config", str(bad)], "must be a JSON object")


@pytest.mark.parametrize("key, message", [
    ("w_smoth", "unknown config field w_smoth (did you mean w_smooth?); the config fields are: "),
    ("model.num_capsule", "unknown model config field model.num_capsule (did you mean "
                          "model.num_capsules?); the model config fields are: "),
    ("zzz", "unknown config field zzz; the config fields are: "),
    ("loop.sed", "unknown loop config field loop.sed (did you mean loop.seed?); the loop config "
                 "fields are: "),
])
def test_an_unknown_set_key_names_the_closest_and_every_field(tiny_geo, two_ranks, key, message):
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--set", f"{key}=1"])
    _refused([str(tiny_geo), "--config", str(two_ranks), "--set", f"{key}=1"], message)
    assert res.exit_code == 1 and res.output.count("\n") == 1, res.output  # the profile's path
    assert message in res.output and "__init__" not in res.output
    group = key.split(".")[0] if "." in key else ""
    cls = {"model": ModelConfig, "loop": LoopConfig}.get(group, TrainConfig)
    prefix = f"{group}." if group else ""
    listed = res.output.strip().split("fields are: ")[1].split(", ")
    groups = {"model", "loop"}  # a group stands for its fields: model.KEY, loop.KEY
    assert {prefix + f.name for f in dataclasses.fields(cls) if f.name not in groups} <= set(listed)
    assert cls is not TrainConfig or {"model.KEY", "loop.KEY"} <= set(listed)


def test_set_text_follows_the_fields_type():
    assert parse_text(TrainConfig, "out", "123") == "123", "a folder named 123"
    assert parse_text(TrainConfig, "init", "null") is None
    assert parse_text(TrainConfig, "lr", "3e-3") == 3e-3
    assert parse_text(TrainConfig, "blur_sigmas", "[0, 1.5]") == [0, 1.5]
    assert TrainConfig().replace(blur_sigmas=[0, 1.5], warmup_steps=3).blur_sigmas == (0.0, 1.5)
