"""PSD's trainer: the two stages, checkpoints and the data reader (resume, the resume rule
and the NaN stop: tests/test_trainloop_methods.py)."""
import csv
import dataclasses
import itertools
import json

import numpy as np
import pytest
import torch

from baselines.psd import PsdError, checkpoint
from baselines.psd.config import PROFILES, ModelConfig, TrainConfig
from baselines.psd.data import load_train, load_visible
from baselines.psd.starts import start_loop, start_score
from baselines.psd.trainer import PsdTask, choose_active, fit
import trainloop
from trainloop import config_difference

SIZE, N = 32, 24


def _cfg(out, **kw):
    model = ModelConfig(image_size=SIZE, latent_dim=5, kernel_hidden=(8,), unet_width=4,
                        motion_scale=2, motion_kernels=(3,))
    base = TrainConfig().replace(model=model, out=str(out), seed=1, device="cpu", threads=1,
                                 batch_size=4, steps=8, stage1_fraction=0.5, active_pairs=8, kl_active=0.0,
                       retry_steps=2, log_every=1)
    return base.replace(**kw)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, size=(N, 2, SIZE, SIZE, 3), dtype=np.uint8)
    flow = rng.normal(0, 2, size=(N, SIZE, SIZE, 2)).astype(np.float16)
    return frames, flow


def test_two_stages_export_and_log(tmp_path):
    frames, flow = _data()
    path = fit(_cfg(tmp_path / "run"), frames, flow, progress=False)
    meta = checkpoint.meta_of(checkpoint.read(path))
    assert meta["stage2_step"] == 4 and meta["step"] == 8 and meta["stop_reason"] == "steps"
    assert len(meta["kl"]) == 5 and len(meta["active_dims"]) >= 1
    assert np.array(meta["structure"]).shape == (len(meta["active_dims"]),) * 2
    model = checkpoint.load(path)
    assert model.active_dims() == sorted(meta["active_dims"]) and not model.training
    stages = [r["stage"] for r in csv.DictReader(open(tmp_path / "run" / "log.csv"))]
    assert stages == ["1"] * 4 + ["2"] * 4
    stage1 = checkpoint.read(tmp_path / "run" / "stage1.pt")  # the state at the switch
    assert checkpoint.meta_of(stage1)["step"] == 4 and not stage1["model"]["active"].any()
    assert sorted(checkpoint.meta_of(stage1)["active_dims"]) == meta["active_dims"]  # KL order


@pytest.mark.parametrize("fresh", [False, True])
def test_stage_two_may_start_with_a_fresh_adam(tmp_path, fresh):
    frames, flow = _data()
    fit(_cfg(tmp_path, stage2_fresh_optimizer=fresh), frames, flow, progress=False)
    adam = checkpoint.read(tmp_path / "checkpoint.pt")["optimizer"]
    # the image decoder trains in both stages: 8 steps, or the 4 since the switch
    assert max(float(s["step"]) for s in adam["state"].values()) == (4 if fresh else 8)


def test_active_dimensions_by_kl_never_a_dead_one():
    kl = np.array([0.1, 3.0, 0.7, 0.0007, 5.0, 0.5])  # nats
    assert choose_active(kl, 0.5) == [4, 1, 2]  # largest first; 0.5 itself is not above
    assert choose_active(kl, 4.0) == [4]  # one live dimension: not padded with dead ones
    assert choose_active(kl, 10.0) == []


def test_active_dimensions_leave_out_a_copy_of_a_chosen_one():
    rng = np.random.default_rng(0)
    m, v = rng.normal(size=(200, 1)), rng.normal(size=(200, 1))  # two independent motions
    noise = 0.01 * rng.normal(size=(200, 1))
    means = np.hstack([m, -0.9 * m + noise, v, 0.2 * m + v])  # (N, 4): dim 1 copies dim 0
    kl = np.array([3.0, 1.8, 2.0, 1.0])
    assert choose_active(kl, 0.5, means, 0.99) == [0, 2, 3]  # dim 3 (r 0.2 with m) is kept
    assert choose_active(kl, 0.5, means, 1.0) == [0, 2, 1, 3]  # off: by KL alone
    assert choose_active(kl[[1, 0, 2, 3]], 0.5, means[:, [1, 0, 2, 3]], 0.99) == [1, 2, 3]
    flat = np.hstack([means, np.ones((200, 1))])  # a live dimension with a constant mean
    assert choose_active(np.append(kl, 0.9), 0.5, flat, 0.99) == [0, 2, 3, 4]


def test_the_long_profile_leaves_out_a_partial_copy_too():
    """The long profile's seed 0 had a third dimension on the circle's motion correlating -0.884
    with the first: under 0.9 it became a part of its own (docs/baselines/psd.md)."""
    rng = np.random.default_rng(1)
    m, v = rng.normal(size=(500, 1)), rng.normal(size=(500, 1))
    partial = -(m + 0.55 * rng.normal(size=(500, 1)))  # a noisy copy of m
    means = np.hstack([m, v, partial, 0.1 * m + v])  # (N, 4)
    assert 0.85 < -np.corrcoef(m[:, 0], partial[:, 0])[0, 1] < 0.9
    kl = np.array([2.4, 2.2, 1.9, 1.0])
    assert choose_active(kl, 0.5, means, 0.9) == [0, 1, 2]  # the old setting keeps the copy
    assert choose_active(kl, 0.5, means, PROFILES["long"].active_max_corr) == [0, 1]


def test_stage_one_goes_on_from_the_start_with_the_lowest_flow_loss(tmp_path):
    frames, flow = _data()
    cfg = _cfg(tmp_path / "run", starts=3, start_fraction=0.25)  # 3 starts of 2 steps, then 6
    assert [(s.steps, s.seed) for s in (start_loop(cfg, i) for i in range(3))] == [
        (2, 1), (2, 1001), (2, 2001)]
    path = fit(cfg, frames, flow, progress=False)
    meta = checkpoint.meta_of(checkpoint.read(path))
    scores = [s["flow"] for s in meta["starts"]]
    assert [s["seed"] for s in meta["starts"]] == [1, 1001, 2001] and len(set(scores)) == 3
    assert meta["start"] == int(np.argmin(scores))
    assert meta["step"] == 8 and meta["stage2_step"] == 4  # the whole run's schedule
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    chosen = list(csv.DictReader(open(tmp_path / "run" / "starts" / str(meta["start"]) /
                                      "log.csv")))
    assert len(chosen) == 2 and rows[:2] == chosen and len(rows) == 8
    assert scores[meta["start"]] == pytest.approx(start_score(
        tmp_path / "run" / "starts" / str(meta["start"]) / "log.csv"), abs=1e-5)
    # Interrupted after its starts (no run checkpoint yet): the same choice, the same model.
    weights = checkpoint.read(path)["model"]
    for name in ("checkpoint.pt", "model.pt", "log.csv"):
        (tmp_path / "run" / name).unlink()
    again = checkpoint.read(fit(cfg, frames, flow, progress=False))
    assert checkpoint.meta_of(again)["start"] == meta["start"]
    assert all(torch.equal(weights[k], again["model"][k]) for k in weights)
    with pytest.raises(PsdError, match="start_fraction"):
        cfg.replace(start_fraction=0.5).validate()  # not before stage 2 (stage1_fraction 0.5)


def _log_without_timing(path):
    return [{k: v for k, v in row.items() if k not in ("seconds", "pairs_per_s")}
            for row in csv.DictReader(open(path))]


def test_the_starts_and_the_stage_switch_follow_the_step_alone(tmp_path, monkeypatch):
    """A start trains its share of the steps whatever the guard; on a machine whose clock runs
    100 s a reading (and a guard far above that), the same starts, the same choice, the same
    switch step and the same log and weights."""
    cfg = _cfg(tmp_path / "fast", starts=3, start_fraction=0.25, kl_warmup=0.5)
    for guard in (None, 1e-3, 1e6):
        loops = [start_loop(cfg.replace(max_minutes=guard), i) for i in range(3)]
        assert [(s.steps, s.max_minutes) for s in loops] == [(2, guard)] * 3
    frames, flow = _data()
    fast = checkpoint.read(fit(cfg, frames, flow, progress=False))
    ticks = itertools.count()
    monkeypatch.setattr(trainloop.loop.time, "monotonic", lambda: next(ticks) * 100.0)
    slow_cfg = cfg.replace(out=str(tmp_path / "slow"), max_minutes=1e6)
    slow = checkpoint.read(fit(slow_cfg, frames, flow, progress=False))
    meta_fast, meta_slow = checkpoint.meta_of(fast), checkpoint.meta_of(slow)
    assert meta_slow["train_seconds"] >= 800  # 100 s a step: the slow clock was read
    for key in ("start", "starts", "stage2_step", "step", "active_dims"):
        assert meta_fast[key] == meta_slow[key], key
    assert meta_slow["stage2_step"] == 4  # stage1_fraction 0.5 of 8 steps
    assert (_log_without_timing(tmp_path / "fast" / "log.csv")
            == _log_without_timing(tmp_path / "slow" / "log.csv"))
    assert all(torch.equal(fast["model"][k], slow["model"][k]) for k in fast["model"])


def test_the_stage_switch_reads_the_runs_step_not_the_loops_fraction(tmp_path):
    """In a start the loop's fraction is over the start's steps; PSD's schedule is over the
    run's. A loop fraction near 1 (a clock's, say) at step 1 of 8 switches nothing."""
    frames, flow = _data()
    cfg = _cfg(tmp_path)
    task = PsdTask(cfg, torch.from_numpy(frames), torch.from_numpy(flow))
    model = task.build(torch.device("cpu"))

    def ctx(step, fraction):
        return trainloop.StepContext(step=step, epoch=0, fraction=fraction, rank=0, world=1,
                                     rows=N, device=torch.device("cpu"), state={"step": step})

    assert task.run_fraction(ctx(1, 0.99)) == 1 / 8
    assert not task.before_step(model, ctx(1, 0.99)) and not model.stage2
    assert task.before_step(model, ctx(4, 0.0)) and model.stage2  # stage1_fraction 0.5


def test_stage_two_waits_for_a_live_dimension(tmp_path):
    frames, flow = _data()
    path = fit(_cfg(tmp_path / "run", kl_active=1e9), frames, flow, progress=False)
    meta = checkpoint.meta_of(checkpoint.read(path))
    assert meta["active_dims"] == [] and "stage2_step" not in meta and meta["step"] == 8
    stages = [r["stage"] for r in csv.DictReader(open(tmp_path / "run" / "log.csv"))]
    assert stages == ["1"] * 8


def test_a_checkpoint_written_before_the_switches_keeps_its_model():
    raw = json.loads(PROFILES["quick"].to_json())
    for key in ("odd_motion", "unet_down_bias", "bn_init_std", "motion_encoder_layers"):
        raw["model"].pop(key)
    raw["min_active"], raw["stage2_pairs"] = 3, 120000  # retired fields
    cfg = TrainConfig.from_json(json.dumps(raw))
    assert cfg.model.odd_motion and cfg.model.unet_down_bias and cfg.model.bn_init_std == 0
    assert cfg.model.encoder_layers == 6  # log2(64): the old depth rule


def test_bad_inputs_are_refused(tmp_path):
    frames, flow = _data()
    with pytest.raises(PsdError, match="frames must be uint8"):
        fit(_cfg(tmp_path / "run"), frames.astype(np.float32), flow, progress=False)
    with pytest.raises(PsdError, match="fewer than one batch"):
        fit(_cfg(tmp_path / "run", batch_size=32), frames, flow, progress=False)
    with pytest.raises(PsdError, match="stage1_fraction"):
        _cfg(tmp_path, stage1_fraction=1.0).validate()


def test_checkpoint_read_refuses_missing_corrupt_and_foreign_files(tmp_path):
    with pytest.raises(PsdError, match="does not exist"):
        checkpoint.read(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    with pytest.raises(PsdError, match="corrupt"):
        checkpoint.read(bad)
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(PsdError, match="not a PSD checkpoint"):
        checkpoint.read(tmp_path / "other.pt")


def test_config_json_round_trip_and_profiles():
    for name, cfg in PROFILES.items():
        cfg.validate()
        assert TrainConfig.from_json(cfg.to_json()) == cfg, name
    quick, smoke = PROFILES["quick"], PROFILES["smoke"]
    assert smoke.model.image_size == 32 and smoke.loop.steps < 100
    assert smoke.loop.max_minutes is None
    # what the shared resume rule names between them (budget and logging may differ on resume)
    diff = config_difference(dataclasses.asdict(smoke), dataclasses.asdict(quick))
    assert {"active_pairs", "loop.batch_size", "model.image_size"} <= set(diff)
    assert not {"loop.log_every", "loop.max_minutes", "loop.steps", "loop.out"} & set(diff)
    with pytest.raises(PsdError, match="unknown"):
        TrainConfig.from_json('{"nope": 1}')


def test_the_long_profile_is_the_quick_model_with_its_documented_changes():
    """docs/baselines/psd.md ("Profiles") lists what the long profile changes against the quick
    one; a change here that the doc does not list fails."""
    quick, long = PROFILES["quick"], PROFILES["long"]
    diff = config_difference(dataclasses.asdict(quick), dataclasses.asdict(long))
    assert set(diff) == {"lr", "kl_warmup", "w_local", "active_max_corr", "starts",
                         "stage2_fresh_optimizer", "model.odd_motion",
                         "model.stage2_feature_stride", "model.stage2_flow"}
    assert long.loop.steps == 28_000 and long.loop.threads == 1 and long.starts == 3
    # the starts that are not trained on add 8% to the steps (two of 1,120): the profile's
    # "about 160 minutes" where its 28,000 steps took 150
    starts = [start_loop(long, i).steps for i in range(long.starts)]
    assert starts == [1_120] * 3 and long.loop.steps + sum(starts[1:]) == 30_240
    assert not PROFILES["gpu"].model.odd_motion and PROFILES["gpu"].w_local == 0.0
    assert PROFILES["gpu"].model.stage2_flow == "all"  # PSD's


def test_load_train_reads_pairs_and_flow(tiny_geo):
    frames, flow = load_train(tiny_geo, limit=10)
    assert frames.shape == (10, 2, SIZE, SIZE, 3) and frames.dtype == np.uint8
    assert flow.shape == (10, SIZE, SIZE, 2) and flow.dtype == np.float16
    assert np.abs(flow).max() > 0.5  # the shapes move
    visible = load_visible(tiny_geo, 5)
    assert visible.shape == (5, SIZE, SIZE) and visible.dtype == np.uint8
    assert set(np.unique(visible)) <= {0, 1, 2, 3} and visible.max() > 0
    with pytest.raises(PsdError, match="not a geogen dataset"):
        load_train(tiny_geo / "nothing")


def test_the_finished_run_holds_its_probe(tmp_path):
    frames, flow = _data()
    visible = np.random.default_rng(1).integers(0, 4, (6, SIZE, SIZE), dtype=np.uint8)
    path = fit(_cfg(tmp_path / "run"), frames, flow, progress=False, visible=visible)
    found = checkpoint.meta_of(checkpoint.read(path))["probe"]
    assert found["pairs"] == 6 and found["active_dims"] == checkpoint.load(path).active_dims()
    with pytest.raises(PsdError, match="visible must be"):
        fit(_cfg(tmp_path / "other"), frames, flow, progress=False, visible=visible[:, :4])


def test_the_probe_names_the_datas_parts(tmp_path):
    from geogen import figure
    frames, flow = _data()
    visible = np.random.default_rng(1).integers(0, 11, (6, SIZE, SIZE), dtype=np.uint8)
    with pytest.raises(PsdError, match="names part 9, but only 3 parts"):
        fit(_cfg(tmp_path / "geo"), frames, flow, progress=False, visible=visible)
    path = fit(_cfg(tmp_path / "run"), frames, flow, progress=False, visible=visible,
               parts=figure.PARTS)
    found = checkpoint.meta_of(checkpoint.read(path))["probe"]
    assert found["dims"]
    assert all(set(d["iou_by_part"]) == set(figure.PARTS) for d in found["dims"])
    assert set(found["assignment"]) <= set(figure.PARTS) and found["assignment"]
