"""Guess What Moves' trainer, checkpoints and adapter: a smoke run lowers the loss from its
start, bad input and checkpoints are refused in one line, the profiles, the schedule, K from
the data, and that test time sees one frame (resume and the NaN stop:
tests/test_trainloop_methods.py; training end to end: tests/test_registry_contract.py)."""
import csv

import numpy as np
import pytest
import torch

from baselines.gwm import PROFILES, GwmError, ModelConfig, TrainConfig, checkpoint, trainer
from benchmark.errors import BenchmarkError
from benchmark.registry import Axes, TrainSpec, get_method

SIDE = 16


def _pairs(n: int = 16):
    """Frames (N, H, W, 3) uint8 of a dark square on a light background, the square moving by
    its own (dx, dy) and the background still: the flow a mask network can predict from
    the frame."""
    rng = np.random.default_rng(0)
    frames = np.full((n, SIDE, SIDE, 3), 220, np.uint8)
    flow = np.zeros((n, SIDE, SIDE, 2), np.float16)
    for i in range(n):
        x, y = rng.integers(2, SIDE - 8, 2)
        frames[i, y:y + 6, x:x + 6] = 30
        flow[i, y:y + 6, x:x + 6] = rng.uniform(-3, 3, 2)
    return frames, flow


def _config(out, steps=12):
    model = ModelConfig(image_size=SIDE, num_masks=2, widths=(8, 16), groups=4)
    return TrainConfig().replace(model=model, out=str(out), seed=0, device="cpu", threads=1,
                                 batch_size=4, steps=steps, warmup_steps=0, lr=3e-3,
                                 log_every=1, checkpoint_minutes=0.0)


def test_a_smoke_run_trains_exports_and_lowers_the_loss(tmp_path):
    frames, flow = _pairs()
    path = trainer.fit(_config(tmp_path / "run"), frames, flow, progress=False)
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    assert len(rows) == 12 and {"loss", "rec"} <= set(rows[0])
    first, last = float(rows[0]["rec"]), float(rows[-1]["rec"])
    assert last < first, (first, last)
    model = checkpoint.load(path)
    x = torch.from_numpy(frames[:2]).permute(0, 3, 1, 2).float() / 255
    assert model.masks(x).shape == (2, 2, SIDE, SIDE)
    assert checkpoint.meta_of(checkpoint.read(path))["pairs"] == 48


def test_bad_training_input_is_one_line(tmp_path):
    frames, flow = _pairs()
    cfg = _config(tmp_path / "run")
    with pytest.raises(GwmError, match=r"frames must be uint8 \(N, 16, 16, 3\), got float32"):
        trainer.fit(cfg, frames.astype(np.float32), flow, progress=False)
    with pytest.raises(GwmError, match=r"flow must be floating point \(N=16, 16, 16, 2\)"):
        trainer.fit(cfg, frames, flow[:, :8], progress=False)
    with pytest.raises(GwmError, match="flow must be floating point"):
        trainer.fit(cfg, frames, flow.astype(np.int16), progress=False)
    with pytest.raises(GwmError, match="cannot read the train split of"):
        trainer.train(cfg, tmp_path / "nowhere", progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("changes, message", [
    ({"flow_model": "cubic"}, "flow_model must be one of affine, quadratic, got 'cubic'"),
    ({"criterion": "huber"}, "criterion must be one of l2, l1, got 'huber'"),
    ({"ridge": -1.0}, "ridge must be finite and >= 0, got -1.0"),
    ({"ridge": float("nan")}, "ridge must be a finite number, got nan"),
    ({"flow_clip": 0.0}, "flow_clip must be finite and > 0, got 0.0"),
    ({"poly_steps": 0}, "warmup_steps must be >= 0 and poly_steps >= 1"),
    ({"model": {"num_masks": 1}}, "num_masks must be >= 2"),
])
def test_bad_settings_are_one_line(changes, message):
    with pytest.raises(GwmError, match=message):
        TrainConfig().replace(**changes).validate()
    with pytest.raises(GwmError, match="unknown TrainConfig fields"):
        TrainConfig.from_json('{"nope": 1}')


def test_load_refuses_missing_corrupt_and_foreign_checkpoints(tmp_path):
    with pytest.raises(GwmError, match="does not exist"):
        checkpoint.load(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(GwmError, match="corrupt"):
        checkpoint.load(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"format": "something-else"}, foreign)
    with pytest.raises(GwmError, match="not a Guess What Moves checkpoint"):
        checkpoint.load(foreign)
    with pytest.raises(BenchmarkError, match="gwm checkpoint"):
        get_method("gwm").load(bad)


def test_profiles_round_trip_and_follow_the_official_solver():
    for name, cfg in PROFILES.items():
        cfg.validate()
        assert TrainConfig.from_json(cfg.to_json()) == cfg, name
    official = TrainConfig()
    assert (official.lr, official.weight_decay, official.loop.batch_size) == (1.5e-4, 0.01, 8)
    assert (official.loop.grad_clip, official.loop.steps, official.w_rec) == (0.01, 20_000, 0.03)
    assert (official.flow_model, official.flow_clip, official.model.num_masks) == (
        "quadratic", 20.0, 4)
    assert {p.flow_model for p in PROFILES.values()} == {"quadratic"}
    for name in ("quick", "long"):  # the poly schedule spans 8 budgets, as 20k of 160k
        assert PROFILES[name].poly_steps == 8 * PROFILES[name].loop.steps
        assert PROFILES[name].loop.threads == 1


def test_the_schedule_warms_up_then_decays_polynomially():
    cfg = TrainConfig().replace(warmup_steps=10, poly_steps=100)
    f = [trainer.lr_factor(s, cfg) for s in (0, 5, 10, 50, 100)]
    assert f[0] == pytest.approx(1e-6) and f[1] == pytest.approx(0.5 * 0.95 ** 0.9, rel=1e-4)
    assert f[2] == pytest.approx(0.9 ** 0.9) and f[3] == pytest.approx(0.5 ** 0.9) and f[4] == 0


def test_the_adapter_takes_k_from_the_data_and_sees_one_frame(tmp_path):
    method = get_method("gwm")
    assert method.uses_ground_truth == () and method.amodal is False
    spec = TrainSpec(dataset="geo", profile="quick", seed=0, data_root=tmp_path,
                     run_dir=tmp_path / "run", image_size=64)
    assert method.config(spec)["model"]["num_masks"] == 4  # three shapes and the background
    parts = tuple(f"part{i}" for i in range(10))
    assert method.config(TrainSpec(**{**spec.__dict__, "slots": parts}))["model"]["num_masks"] == 11
    two = TrainSpec(**{**spec.__dict__, "variant": Axes(num_capsules=2)})
    assert method.config(two)["model"]["num_masks"] == 2
    with pytest.raises(BenchmarkError, match="no Table 3 axes shape_dim"):
        method.config(TrainSpec(**{**spec.__dict__, "variant": Axes(shape_dim=3)}))
    with pytest.raises(BenchmarkError, match="gwm config: gwm has no profile 'paper'"):
        method.config(TrainSpec(**{**spec.__dict__, "profile": "paper"}))
    # predict reads frame 0 only: another frame 1 or a flow changes nothing
    torch.manual_seed(0)
    from baselines.gwm import MaskNet
    net = MaskNet(ModelConfig(image_size=SIDE, widths=(8, 16), groups=4)).eval()
    img0 = np.random.default_rng(0).random((2, 3, SIDE, SIDE), dtype=np.float32)
    a = method.predict(net, img0, img0)
    b = method.predict(net, img0, 1 - img0, gt_flow=np.ones((2, 2, SIDE, SIDE), np.float32))
    assert a.flow is None and np.array_equal(a.masks, b.masks)
    assert np.allclose(a.masks.sum(1), 1, atol=1e-5) and a.features.shape == (2, 4 * 8)
    with pytest.raises(BenchmarkError, match=r"gwm expects images \(B, 3, 16, 16\)"):
        method.predict(net, img0[:, :, :8], img0)
