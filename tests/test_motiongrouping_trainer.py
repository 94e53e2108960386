"""Motion Grouping's trainer, checkpoints and adapter: bad input and checkpoints refused in one
line, the profiles, K from the variant, the flow it needs at test time (resume and the NaN
stop: tests/test_trainloop_methods.py; training end to end: tests/test_registry_contract.py)."""
import dataclasses

import numpy as np
import pytest
import torch

from baselines.motiongrouping import PROFILES, MotionGroupingError, TrainConfig, checkpoint
from baselines.motiongrouping import trainer
from benchmark.errors import BenchmarkError
from benchmark.registry import Axes, TrainSpec, get_method


def test_load_refuses_missing_corrupt_and_foreign_checkpoints(tmp_path):
    with pytest.raises(MotionGroupingError, match="does not exist"):
        checkpoint.load(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(MotionGroupingError, match="corrupt"):
        checkpoint.load(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"format": "something-else"}, foreign)
    with pytest.raises(MotionGroupingError, match="not a Motion Grouping checkpoint"):
        checkpoint.load(foreign)
    with pytest.raises(BenchmarkError, match="motiongrouping checkpoint"):
        get_method("motiongrouping").load(bad)


def test_config_json_round_trip_and_profiles():
    for name, cfg in PROFILES.items():
        cfg.validate()
        assert TrainConfig.from_json(cfg.to_json()) == cfg, name
    assert PROFILES["quick"].model.num_slots >= 4  # three shapes and the background
    assert PROFILES["quick"].loop.threads == 1 and PROFILES["quick"].loop.steps == 15_000
    # The CPU budget is short of steps: small batches at half the side (the budget probes).
    quick = PROFILES["quick"]
    assert (quick.loop.batch_size, quick.lr, quick.warmup_steps) == (8, 5e-4, 200)
    assert (quick.model.work_scale, quick.model.decoder_scale) == (2, 2)
    # The official network, on the colour-coded input its README trains with
    assert PROFILES["gpu"].model == dataclasses.replace(TrainConfig().model, input_form="rgb")
    assert {p.model.input_form for p in PROFILES.values()} == {"rgb"}
    with pytest.raises(MotionGroupingError, match="unknown TrainConfig fields"):
        TrainConfig.from_json('{"nope": 1}')
    with pytest.raises(MotionGroupingError, match="w_entropy must be finite and >= 0"):
        TrainConfig(w_entropy=-1.0).validate()


def test_the_adapter_takes_k_from_the_variant_and_refuses_other_axes(tmp_path):
    method = get_method("motiongrouping")
    spec = TrainSpec(dataset="geo", profile="quick", seed=0, data_root=tmp_path,
                     run_dir=tmp_path / "run", image_size=64)
    assert method.config(spec)["model"]["num_slots"] == PROFILES["quick"].model.num_slots
    official = TrainSpec(**{**spec.__dict__, "variant": Axes(num_capsules=2)})
    assert method.config(official)["model"]["num_slots"] == 2
    with pytest.raises(BenchmarkError, match="no Table 3 axes shape_dim"):
        method.config(TrainSpec(**{**spec.__dict__, "variant": Axes(shape_dim=3)}))
    with pytest.raises(BenchmarkError, match="has no profile 'long'"):
        method.config(TrainSpec(**{**spec.__dict__, "profile": "long"}))


def test_the_adapter_takes_k_from_the_datas_parts(tmp_path):
    from baselines.motiongrouping.config import slots_for
    from geogen import figure, schema
    method = get_method("motiongrouping")
    spec = TrainSpec(dataset="articulated", profile="smoke", seed=0, data_root=tmp_path,
                     run_dir=tmp_path / "run", image_size=32, slots=figure.PARTS)
    assert method.config(spec)["model"]["num_slots"] == 11  # ten parts and the background
    assert slots_for(len(schema.SLOTS)) == TrainConfig().model.num_slots  # Geo's stays 4
    ablated = TrainSpec(**{**spec.__dict__, "variant": Axes(num_capsules=16)})
    assert method.config(ablated)["model"]["num_slots"] == 16


def test_fit_refuses_flow_of_the_wrong_shape(tmp_path):
    cfg = PROFILES["smoke"].replace(out=str(tmp_path), device="cpu")
    with pytest.raises(MotionGroupingError, match=r"flow must be \(N, 32, 32, 2\)"):
        trainer.fit(cfg, np.zeros((8, 16, 16, 2), np.float32), progress=False)
    with pytest.raises(MotionGroupingError, match="fewer than one batch"):
        trainer.fit(cfg, np.zeros((3, 32, 32, 2), np.float32), progress=False)


def test_predict_needs_the_ground_truth_flow(tmp_path):
    from baselines.motiongrouping import MotionGrouping
    method = get_method("motiongrouping")
    model = MotionGrouping(PROFILES["smoke"].model).eval()
    img = np.zeros((2, 3, 32, 32), np.float32)
    with pytest.raises(BenchmarkError, match="needs the ground-truth flow"):
        method.predict(model, img, img)
    with pytest.raises(BenchmarkError, match="needs the ground-truth flow"):
        method.embed(model, img)
    with pytest.raises(BenchmarkError, match="gt_flow must be"):
        method.predict(model, img, img, gt_flow=np.zeros((2, 1, 32, 32), np.float32))
    flow = np.random.default_rng(0).normal(0, 2, (2, 2, 32, 32)).astype(np.float32)
    pred = method.predict(model, img, img, gt_flow=flow)
    pred.check(2, 32)
    k = PROFILES["smoke"].model.num_slots
    assert pred.masks.shape == (2, k, 32, 32) and np.array_equal(pred.masks, pred.visible)
    assert np.allclose(pred.masks.sum(1), 1, atol=1e-5)  # the alphas share every pixel
    assert pred.extras["layer"].max() == pytest.approx(1.0)
    assert np.allclose(method.embed(model, img, gt_flow=flow), pred.features, atol=1e-5)


def _first_step(cfg, flow):
    """The model seeded 0 and its first training step on `flow` (B, H, W, 2) pixels:
    (model, total, terms)."""
    import trainloop
    task = trainer.MotionGroupingTask(cfg)
    torch.manual_seed(0)
    model = task.build(torch.device("cpu"))
    ctx = trainloop.StepContext(step=0, epoch=0, fraction=0.0, rank=0, world=1, rows=2,
                                device=torch.device("cpu"), state={})
    total, terms = task.step(model, (flow,), torch.Generator(), ctx)
    return model, total, terms


def test_the_reconstruction_loss_is_taken_in_the_networks_flow_unit():
    # The smoke profile at 32 px with flow_unit 0.1: 3.2 pixels a unit, so the recon term is
    # the pixel MSE / 3.2^2 (in pixels, the official, it would be 10 times larger).
    cfg = PROFILES["smoke"].replace(device="cpu", model={"input_form": "uv"})
    unit = cfg.model.unit_pixels
    assert unit == pytest.approx(0.1 * 32)
    flow = 4 * torch.randn(2, 32, 32, 2)  # (B, H, W, 2) pixels
    model, total, terms = _first_step(cfg, flow)
    with torch.no_grad():
        pixels_mse = ((model(flow.permute(0, 3, 1, 2)).flow - flow.permute(0, 3, 1, 2)) ** 2).mean()
    assert terms["recon"].item() == pytest.approx(pixels_mse.item() / unit ** 2, rel=1e-4)
    assert total.item() == pytest.approx(cfg.w_recon * terms["recon"].item()
                                         + cfg.w_entropy * terms["entropy"].item(), rel=1e-5)


def test_the_rgb_step_scores_the_coding_and_the_adapter_decodes_the_flow():
    from baselines.motiongrouping.flowcode import flow_to_rgb
    cfg = PROFILES["smoke"].replace(device="cpu", model={"input_form": "rgb"})
    flow = 4 * torch.randn(2, 32, 32, 2)  # (B, H, W, 2) pixels
    model, _total, terms = _first_step(cfg, flow)
    with torch.no_grad():
        out = model(flow.permute(0, 3, 1, 2))
        mse = ((out.recon - flow_to_rgb(flow.permute(0, 3, 1, 2))) ** 2).mean()
    assert terms["recon"].item() == pytest.approx(mse.item(), rel=1e-4)
    img = np.zeros((2, 3, 32, 32), np.float32)
    pred = get_method("motiongrouping").predict(model.eval(), img, img,
                                                gt_flow=flow.permute(0, 3, 1, 2).numpy())
    pred.check(2, 32)
    assert pred.flow.shape == (2, 2, 32, 32) and pred.extras["layer"].max() == pytest.approx(1.0)
