"""R-NEM's trainer and checkpoints: refusing bad checkpoints, profiles, the clip reader (resume
and the NaN stop: tests/test_trainloop_methods.py)."""
import numpy as np
import pytest
import torch

from baselines.rnem import PROFILES, ModelConfig, RnemError, TrainConfig
from baselines.rnem import checkpoint, trainer

TINY = TrainConfig().replace(model=ModelConfig(image_size=16, work_size=16, enc_channels=(4, 8, 8),
                                               enc_hidden=12, state_size=10, rel_hidden=8,
                                               att_hidden=6, dec_hidden=12, em_steps=2),
                             clip_frames=3, batch_size=4, steps=4, threads=1, log_every=1,
                             device="cpu")


def _clips(n=12):
    return np.random.default_rng(0).integers(0, 256, (n, 3, 3, 16, 16), dtype=np.uint8)


def test_load_refuses_missing_corrupt_and_foreign_checkpoints(tmp_path):
    with pytest.raises(RnemError, match="does not exist"):
        checkpoint.load(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(RnemError, match="corrupt"):
        checkpoint.load(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"format": "something-else"}, foreign)
    with pytest.raises(RnemError, match="not an R-NEM checkpoint"):
        checkpoint.load(foreign)


def test_the_adapter_turns_bad_checkpoints_into_benchmark_errors(tmp_path):
    from benchmark.errors import BenchmarkError
    from benchmark.registry import get_method
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(BenchmarkError, match="rnem checkpoint"):
        get_method("rnem").load(bad)


def test_config_json_round_trip_and_profiles():
    for name, cfg in PROFILES.items():
        cfg.validate()
        assert TrainConfig.from_json(cfg.to_json()) == cfg, name
    with pytest.raises(RnemError, match="unknown TrainConfig fields"):
        TrainConfig.from_json('{"nope": 1}')
    # configs written before `prior` (checkpoints of the white prior) keep the fixed prior
    old = TrainConfig.from_json('{"model": {"warmup": 2, "prior_mean": 1.0}}')
    assert (old.model.prior, old.model.prior_mean, old.model.e_epsilon) == ("fixed", 1.0, 0.0)
    with pytest.raises(RnemError, match="prior must be one of"):
        ModelConfig(prior="mean").validate()


def test_every_profile_trains_on_the_adapters_clip_length_with_the_official_schedule():
    from baselines.rnem.config import BASE
    from benchmark.registry import get_method
    assert get_method("rnem").clip_frames == 10
    for name, cfg in PROFILES.items():
        assert cfg.clip_frames == 10, name
        # the smoke profile is the quick one scaled down: same schedule, noise, prior and start
        assert (cfg.noise_prob, cfg.lr, cfg.loop.patience) == (0.2, 1e-3, 10), name
        for field in ("em_steps", "warmup", "sigma", "prior", "prior_mean", "e_epsilon",
                      "init_grid", "num_groups", "mask_init", "colour", "background_group"):
            assert getattr(cfg.model, field) == getattr(BASE.model, field), (name, field)
    assert (BASE.model.em_steps, BASE.model.num_groups, BASE.model.work_size) == (1, 4, 64)
    # the background is the clip's and a fixed group's, so K is the three shapes and a spare
    for name, cfg in PROFILES.items():
        m = cfg.model
        assert (m.prior, m.background_group, m.colour, m.e_epsilon) == ("median", True, "pixel",
                                                                        0.0), name
    assert (PROFILES["long"].model.work_size, PROFILES["long"].loop.batch_size) == (64, 64)
    assert PROFILES["gpu"].loop.eval_every is None  # once an epoch, as the official code


def test_the_adapter_takes_k_from_the_datas_parts(tmp_path):
    from baselines.rnem.config import BASE, groups_for
    from benchmark.registry import Axes, TrainSpec, get_method
    from geogen import figure, schema
    method = get_method("rnem")
    spec = TrainSpec(dataset="geo", profile="quick", seed=0, data_root=tmp_path,
                     run_dir=tmp_path / "run", image_size=64)
    assert method.config(spec)["model"]["num_groups"] == BASE.model.num_groups == 4
    assert groups_for(len(schema.SLOTS)) == 5  # with a learned group for the background
    artic = TrainSpec(**{**spec.__dict__, "dataset": "articulated", "slots": figure.PARTS})
    assert method.config(artic)["model"]["num_groups"] == 11  # ten parts and a spare
    ablated = TrainSpec(**{**artic.__dict__, "variant": Axes(num_capsules=4)})
    assert method.config(ablated)["model"]["num_groups"] == 4


def test_configs_written_before_the_warm_up_read_as_none():
    old = PROFILES["quick"].replace(model={"em_steps": 3})
    raw = old.to_json().replace('"warmup": 2, ', "")
    assert '"warmup"' not in raw
    assert TrainConfig.from_json(raw).model.warmup == 0
    older = old.replace(model={"colour": "group", "background_group": False})
    raw = older.to_json().replace('"colour": "group", ', "").replace(
        '"background_group": false, ', "")
    assert '"colour"' not in raw and '"background_group"' not in raw
    model = TrainConfig.from_json(raw).model
    assert (model.colour, model.background_group) == ("group", False)


def test_clips_are_cut_to_the_clip_length(tmp_path):
    from geogen.make import MakeConfig, make_dataset
    root = tmp_path / "t5"
    make_dataset(MakeConfig(n=6, val=3, test=0, size=32, frames=5, out=str(root), workers=1),
                 progress=False)
    cfg = PROFILES["smoke"].replace(model={"work_size": 16})
    assert trainer.load_clips(root, cfg.replace(clip_frames=3)).shape == (6, 3, 3, 16, 16)
    assert trainer.load_clips(root, cfg).shape == (6, 5, 3, 16, 16)  # T = 10 asked, 5 there
    assert trainer.load_clips(root, cfg.replace(max_clips=2), split="val").shape[0] == 2


def test_validation_loss_is_deterministic_and_fit_early_stops_on_it(tmp_path):
    rng = np.random.default_rng(1)
    clips = rng.integers(0, 256, (12, 3, 3, 16, 16), dtype=np.uint8)
    val = rng.integers(0, 256, (5, 3, 3, 16, 16), dtype=np.uint8)
    cfg = TINY.replace(out=str(tmp_path / "run"), steps=40, eval_every=1, patience=2,
                       lr=0.05)
    task = trainer.RnemTask(cfg, torch.from_numpy(val))
    model = task.build(torch.device("cpu"))
    with torch.no_grad():
        a, b = (task.validation_loss(model, torch.device("cpu")) for _ in range(2))
    assert a == b and a > 0
    path = trainer.fit(cfg, clips, val=val, progress=False)
    meta = checkpoint.meta_of(checkpoint.read(path))
    # 40 steps of a large learning rate on noise: the validation loss stops improving first
    assert meta["stop_reason"] == "early stopping" and meta["step"] < 40
    assert meta["val_bad"] == 2 and meta["val_best_step"] == meta["step"] - 2
    with pytest.raises(RnemError, match="validation clips must be"):
        trainer.fit(cfg, clips, val=val[:, :, :, :8], progress=False)


def test_clips_are_read_cut_and_downsampled(tiny_geo):
    cfg = PROFILES["smoke"].replace(model={"work_size": 16}, max_clips=5)
    clips = trainer.load_clips(tiny_geo, cfg)
    assert clips.shape == (5, 2, 3, 16, 16) and clips.dtype == np.uint8  # 2-frame data, T = 4 asked
    from geogen.dataset import read_split
    frames = read_split(tiny_geo, "train", ("frames",), limit=5)["frames"]  # (5, 2, 32, 32, 3)
    pooled = frames.reshape(5, 2, 16, 2, 16, 2, 3).mean((3, 5)).transpose(0, 1, 4, 2, 3)
    assert np.abs(clips.astype(float) - pooled).max() <= 0.5 + 1e-9
    with pytest.raises(RnemError, match="px images"):
        trainer.load_clips(tiny_geo, cfg.replace(model={"image_size": 64, "work_size": 32}))
