"""The shared loop's promises, checked once for every method that trains through it: a resumed
run ends where an uninterrupted one does, a non-finite loss stops with the last good checkpoint
kept, and the one resume rule (runtime, folder and budget may change, nothing else)."""
import json
import shutil
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
import torch

import flowcaps
from baselines.motiongrouping import ModelConfig as MgModel, MotionGroupingError
from baselines.motiongrouping import TrainConfig as MgConfig
from baselines.motiongrouping import trainer as mg_trainer
import trainloop
from baselines.psd import PsdError
from baselines.psd import trainer as psd_trainer
from baselines.psd.config import ModelConfig as PsdModel, TrainConfig as PsdConfig
from baselines.rnem import ModelConfig as RnemModel, RnemError, TrainConfig as RnemConfig
from baselines.rnem import trainer as rnem_trainer
from baselines.scae import ScaeError, profile
from baselines.scae import trainer as scae_trainer
from flowcaps import trainer as flowcaps_trainer

BATCH_ROWS = 16  # every case's data: 16 rows, batch 4, so 4 steps an epoch


@dataclass(frozen=True)
class Case:
    task: type  # the method's Task class (its step is patched to fail on cue)
    config: Callable[..., Any]  # (out, steps) -> the method's config for a run of `steps`
    fit: Callable[[Any], Any]  # config -> model path, on fixed tiny data
    error: type
    changed: Callable[[Any], Any]  # config -> the same with one non-resumable field changed
    field: str  # that field's name as the refusal names it


def _rng():
    return np.random.default_rng(0)


def _flowcaps_cfg(out, steps):
    model = flowcaps.ModelConfig(image_size=32, num_capsules=3, capsule_dim=8, enc_channels=(4, 8),
                                 enc_hidden=16, dec_hidden=8, dec_depth=2)
    return flowcaps.TrainConfig().replace(model=model, out=str(out), epochs=steps // 4, batch_size=4,
                                lr=1e-3, points=64, smooth_points=8, device="cpu", threads=1,
                                cpu_ranks=1, compile=False, log_every=1, checkpoint_minutes=0.0)


def _flowcaps_fit(cfg, meta=None):
    pairs = _rng().integers(0, 256, (BATCH_ROWS, 2, 32, 32, 3), dtype=np.uint8)
    return flowcaps_trainer.fit(cfg, pairs, progress=False, meta=meta)


def _psd_cfg(out, steps):
    model = PsdModel(image_size=32, latent_dim=5, kernel_hidden=(8,), unet_width=4,
                     motion_scale=2, motion_kernels=(3,))
    return PsdConfig().replace(model=model, out=str(out), seed=1, device="cpu", threads=1, batch_size=4,
                     steps=steps, stage1_fraction=0.5, active_pairs=8, kl_active=0.0, log_every=1,
                     checkpoint_minutes=0.0)


def _psd_fit(cfg, meta=None):
    rng = _rng()
    frames = rng.integers(0, 256, (BATCH_ROWS, 2, 32, 32, 3), dtype=np.uint8)
    flow = rng.normal(0, 2, (BATCH_ROWS, 32, 32, 2)).astype(np.float16)
    return psd_trainer.fit(cfg, frames, flow, progress=False, meta=meta)


def _mg_cfg(out, steps):
    model = MgModel(image_size=16, num_slots=3, iters=2, enc_channels=(4, 8), dec_channels=4,
                    kernel_size=3)
    return MgConfig().replace(model=model, out=str(out), seed=1, device="cpu", threads=1, batch_size=4,
                    steps=steps, warmup_steps=3, log_every=1, checkpoint_minutes=0.0)


def _mg_fit(cfg, meta=None):
    flow = _rng().normal(0, 2, (BATCH_ROWS, 16, 16, 2)).astype(np.float16)
    return mg_trainer.fit(cfg, flow, progress=False, meta=meta)


def _rnem_cfg(out, steps):
    model = RnemModel(image_size=16, work_size=16, enc_channels=(4, 8, 8), enc_hidden=12,
                      state_size=10, rel_hidden=8, att_hidden=6, dec_hidden=12, em_steps=2)
    return RnemConfig().replace(model=model, out=str(out), clip_frames=3, batch_size=4, steps=steps,
                      threads=1, log_every=1, device="cpu", checkpoint_minutes=0.0)


def _rnem_fit(cfg, meta=None):
    clips = _rng().integers(0, 256, (BATCH_ROWS, 3, 3, 16, 16), dtype=np.uint8)
    return rnem_trainer.fit(cfg, clips, progress=False, meta=meta)


def _scae_cfg(kind):
    def make(out, steps):
        cfg = profile(kind, "smoke", "geo")
        if kind == "flowscae":
            cfg = cfg.replace(parts={"n_parts": 4, "n_features": 2})
        return cfg.replace(loop={"out": str(out), "steps": steps, "batch_size": 4,
                                 "checkpoint_minutes": 0.0, "log_every": 1, "threads": 1})
    return make


def _scae_fit(cfg, meta=None):
    rng = _rng()
    if cfg.kind == "scae":
        data = rng.integers(0, 256, (BATCH_ROWS, 32, 32, 3), dtype=np.uint8)
    else:  # part capsules: pose (6), presence (1), features
        data = rng.normal(0, 0.5, (BATCH_ROWS, 4, 7 + 2)).astype(np.float32)
    return scae_trainer.fit(cfg, torch.from_numpy(data), progress=False, meta=meta)


CASES = {
    "flowcaps": Case(flowcaps_trainer.FlowcapsTask, _flowcaps_cfg, _flowcaps_fit,
                     flowcaps.FlowcapsError, lambda c: c.replace(lr=5e-3), "lr"),
    "psd": Case(psd_trainer.PsdTask, _psd_cfg, _psd_fit, PsdError,
                lambda c: c.replace(w_local=0.5), "w_local"),
    "motiongrouping": Case(mg_trainer.MotionGroupingTask, _mg_cfg, _mg_fit, MotionGroupingError,
                           lambda c: c.replace(w_entropy=0.5), "w_entropy"),
    "rnem": Case(rnem_trainer.RnemTask, _rnem_cfg, _rnem_fit, RnemError,
                 lambda c: c.replace(lr=0.5), "lr"),
    "scae": Case(scae_trainer.ScaeTask, _scae_cfg("scae"), _scae_fit, ScaeError,
                 lambda c: c.replace(optim={"lr": 1e-3}), "optim.lr"),
    "flowscae": Case(scae_trainer.ScaeTask, _scae_cfg("flowscae"), _scae_fit, ScaeError,
                     lambda c: c.replace(optim={"lr": 1e-3}), "optim.lr"),
}


def _blob(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def _fail_at(monkeypatch, task: type, call: int, how: str) -> None:
    """The task's step raises KeyboardInterrupt ("interrupt"), or returns a NaN total ("nan"),
    on its `call`-th call (1-based)."""
    real, calls = task.step, {"n": 0}

    def step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call and how == "interrupt":
            raise KeyboardInterrupt
        total, terms = real(self, *args, **kwargs)
        return (total * float("nan") if calls["n"] == call else total), terms

    monkeypatch.setattr(task, "step", step)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_interrupted_run_resumes_to_the_same_weights(name, tmp_path, monkeypatch):
    case = CASES[name]
    straight = case.fit(case.config(tmp_path / "a", 8))
    with monkeypatch.context() as m:
        _fail_at(m, case.task, 6, "interrupt")  # during step 5 (0-based): after PSD's switch
        with pytest.raises(case.error, match="interrupted at step 5; resume with the same command"):
            case.fit(case.config(tmp_path / "b", 8))
    assert json.loads(_blob(tmp_path / "b" / "checkpoint.pt")["progress"])["step"] == 5
    assert not (tmp_path / "b" / "model.pt").exists()
    resumed = case.fit(case.config(tmp_path / "b", 8))
    a, b = _blob(straight)["model"], _blob(resumed)["model"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert json.loads(_blob(resumed)["meta"])["step"] == 8
    rows = (tmp_path / "b" / "log.csv").read_text().splitlines()
    assert rows[0].startswith("step,epoch,") and [int(r.split(",")[0]) for r in rows[1:]] == \
        list(range(1, 9))  # one header; steps 1-5, then 6-8 after the resume


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(name, tmp_path, monkeypatch):
    case = CASES[name]
    _fail_at(monkeypatch, case.task, 3, "nan")
    with pytest.raises(case.error, match="loss not finite at step 2; stopped, last good "
                                         "checkpoint kept at"):
        case.fit(case.config(tmp_path, 8))
    kept = _blob(tmp_path / "checkpoint.pt")
    assert json.loads(kept["progress"])["step"] == 2  # saved after each good step
    assert all(torch.isfinite(v).all() for v in kept["model"].values() if v.is_floating_point())
    assert not (tmp_path / "model.pt").exists()


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_resume_rule_for_every_method(name, tmp_path):
    """Another setting is refused, naming it; the folder moved elsewhere, with a longer budget,
    resumes and trains on to the new budget."""
    case = CASES[name]
    case.fit(case.config(tmp_path / "run", 4))
    with pytest.raises(case.error, match=rf"different config \(fields \['{case.field}'\]\)"):
        case.fit(case.changed(case.config(tmp_path / "run", 4)))
    shutil.move(tmp_path / "run", tmp_path / "moved")
    longer = case.config(tmp_path / "moved", 8)
    path = case.fit(longer)
    assert json.loads(_blob(path)["meta"])["step"] == 8


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_run_resumes_only_on_the_data_it_started_on(name, tmp_path):
    """The data's manifest hash is compared as the config is: a run folder trained on one
    dataset refuses another, naming both; the same data resumes."""
    case = CASES[name]
    first = {trainloop.DATA: "data/a", trainloop.DATA_HASH: "a" * 64}
    case.fit(case.config(tmp_path / "run", 4), meta=first)
    other = {trainloop.DATA: "data/b", trainloop.DATA_HASH: "b" * 64}
    with pytest.raises(case.error, match=r"trained on other data: data/a \(manifest a{12}\), "
                                         r"not data/b \(manifest b{12}\).*--force"):
        case.fit(case.config(tmp_path / "run", 8), meta=other)
    path = case.fit(case.config(tmp_path / "run", 8), meta=first)
    assert json.loads(_blob(path)["meta"])[trainloop.DATA_HASH] == "a" * 64
