"""R-NEM's trainer and checkpoints: refusing bad checkpoints, profiles, the clip reader (resume
and the NaN stop: tests/test_trainloop_methods.py)."""
import numpy as np
import pytest
import torch

from baselines.rnem import PROFILES, ModelConfig, RnemError, TrainConfig
from baselines.rnem import checkpoint, trainer

TINY = TrainConfig(model=ModelConfig(image_size=16, work_size=16, enc_channels=(4, 8, 8),
                                     enc_hidden=12, state_size=10, rel_hidden=8, att_hidden=6,
                                     dec_hidden=12, em_steps=2),
                   clip_frames=3, batch_size=4, max_steps=4, threads=1, log_every=1, device="cpu")


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


def test_the_adapter_trains_on_the_quick_profile_clip_length():
    from baselines.rnem.config import QUICK
    from benchmark.registry import get_method
    assert get_method("rnem").clip_frames == QUICK.clip_frames == PROFILES["quick"].clip_frames
    # the smoke profile is the quick one scaled down: same schedule, noise, prior and start
    smoke, quick = PROFILES["smoke"], PROFILES["quick"]
    assert (smoke.clip_frames, smoke.noise_prob, smoke.lr) == (quick.clip_frames, quick.noise_prob,
                                                               quick.lr)
    for name in ("em_steps", "sigma", "prior_mean", "init_grid", "num_groups", "work_size"):
        assert getattr(smoke.model, name) == getattr(quick.model, name), name


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
