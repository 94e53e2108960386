"""The shared loop on its own: a toy method that brings only its model and step trains, logs,
checkpoints and resumes; the resume rule, the error translation and the log's upgrade."""
import csv
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

import trainloop
from trainloop import log as loop_log


@dataclass(frozen=True)
class ToyConfig:
    width: int = 3


class Toy(trainloop.Task):
    """Least squares on y = x @ w: its model and its step, nothing else."""

    name = "toy"
    unit = "samples"
    config = ToyConfig()
    lr = 0.1

    def build(self, device):
        return nn.Linear(self.config.width, 1, bias=False).to(device)

    def step(self, loss_fn, rows, gen, ctx):
        x, y = rows
        noise = 1e-3 * torch.randn(y.shape, generator=gen)  # the step's own seeded draw
        mse = ((loss_fn(x) - y - noise) ** 2).mean()
        return mse, {"mse": mse}


def _data(n=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=g)
    return x, x @ torch.tensor([[1.0], [-2.0], [0.5]])


def _cfg(out, **kw):
    return trainloop.LoopConfig(out=str(out), seed=0, batch_size=8, epochs=10, device="cpu",
                                threads=1, log_every=4, checkpoint_minutes=0.0, **kw)


def test_a_toy_method_with_only_its_model_and_step_trains_and_exports(tmp_path):
    model, path = trainloop.fit(Toy(), _cfg(tmp_path), _data(), progress=False)
    assert path == tmp_path / "model.pt"
    w = model.weight.detach().numpy().ravel()
    assert np.allclose(w, [1.0, -2.0, 0.5], atol=0.05)  # it learned the line
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    assert list(rows[0]) == ["step", "epoch", "samples", "seconds", "lr", "loss", "mse",
                             "samples_per_s"]
    assert [int(r["step"]) for r in rows] == list(range(4, 81, 4))  # 8 steps an epoch x 10
    assert float(rows[-1]["loss"]) < float(rows[0]["loss"]) / 100
    blob = Toy().read(path)
    meta = trainloop.checkpoint.meta_of(blob)
    assert meta["step"] == 80 and meta["samples"] == 640 and meta["stop_reason"] == "epochs"
    assert meta["samples_total"] == 64 and "optimizer" not in blob


def test_the_toy_resumes_exactly_and_a_budget_may_grow(tmp_path):
    straight, _ = trainloop.fit(Toy(), _cfg(tmp_path / "a"), _data(), progress=False)
    trainloop.fit(Toy(), _cfg(tmp_path / "b", steps=30), _data(), progress=False)
    resumed, _ = trainloop.fit(Toy(), _cfg(tmp_path / "b", steps=80), _data(), progress=False)
    assert torch.equal(straight.weight, resumed.weight)


class PhasedToy(Toy):
    """The toy with a second phase from step 30 on."""

    def __init__(self, fresh):
        self.fresh_optimizer_each_phase = fresh

    def before_step(self, model, ctx):
        return ctx.step == 30


@pytest.mark.parametrize("fresh", [False, True])
def test_a_new_phase_may_start_the_optimiser_afresh(tmp_path, fresh):
    trainloop.fit(PhasedToy(fresh), _cfg(tmp_path), _data(), progress=False)
    adam = Toy().read(tmp_path / "checkpoint.pt")["optimizer"]
    assert float(adam["state"][0]["step"]) == (50 if fresh else 80)  # counted from the phase
    assert adam["param_groups"][0]["lr"] == Toy.lr  # the rates are kept


def test_the_resume_rule_names_the_changed_fields_at_any_depth():
    saved = {"lr": 1e-3, "model": {"width": 3, "threads": 1}, "out": "a", "max_minutes": 5}
    same = {"lr": 1e-3, "model": {"width": 3, "threads": 2}, "out": "b", "max_minutes": 9}
    assert trainloop.config_difference(saved, same) == []
    other = {"lr": 2e-3, "model": {"width": 4, "threads": 1}, "out": "a", "max_minutes": 5,
             "new": True}
    assert trainloop.config_difference(saved, other) == ["lr", "model.width", "new"]


def test_another_config_is_refused_before_training(tmp_path):
    trainloop.fit(Toy(), _cfg(tmp_path), _data(), progress=False)

    class Wider(Toy):
        config = ToyConfig(width=4)

    with pytest.raises(trainloop.LoopError, match=r"different config \(fields \['width'\]\)"):
        trainloop.fit(Wider(), _cfg(tmp_path), _data(), progress=False)


def test_errors_become_the_methods_own_kind():
    class MethodError(RuntimeError):
        pass

    class Interrupted(MethodError):
        def __init__(self, checkpoint, step):
            super().__init__(f"stopped at {step} ({checkpoint})")

    with pytest.raises(MethodError, match="^bad$"):
        with trainloop.errors_as(MethodError):
            raise trainloop.LoopError("bad")
    with pytest.raises(Interrupted, match="stopped at 7"):
        with trainloop.errors_as(MethodError, Interrupted):
            raise trainloop.TrainingInterrupted("ck.pt", 7)
    with pytest.raises(MethodError, match="interrupted at step 7; resume"):
        with trainloop.errors_as(MethodError):
            raise trainloop.TrainingInterrupted("ck.pt", 7)


def test_a_run_needs_a_budget_and_a_batch_of_data(tmp_path):
    with pytest.raises(trainloop.LoopError, match="needs a budget"):
        trainloop.fit(Toy(), trainloop.LoopConfig(out=str(tmp_path), seed=0, batch_size=8),
                      _data(), progress=False)
    with pytest.raises(trainloop.LoopError, match="4 samples on each of 1 rank"):
        trainloop.fit(Toy(), _cfg(tmp_path), _data(4), progress=False)


def test_a_resumed_runs_log_is_rewritten_under_the_current_columns(tmp_path):
    old = tmp_path / "log.csv"
    old.write_text("step,loss,pairs_per_s\n20,0.5,100.0\n40,0.4,110.0\n")
    fields = ("step", "epoch", "loss", "overlap", "pairs_per_s")
    loop_log.upgrade(old, fields)
    rows = list(csv.DictReader(open(old)))
    assert tuple(rows[0].keys()) == fields
    assert [r["step"] for r in rows] == ["20", "40"] and rows[1]["pairs_per_s"] == "110.0"
    assert rows[0]["overlap"] == ""  # a column the old log lacked
    before = old.read_text()
    loop_log.upgrade(old, fields)  # already current: untouched
    assert old.read_text() == before


class Scripted(Toy):
    """The toy with a validation loss read from a script: one value per evaluation."""

    def __init__(self, script):
        self.script, self.calls, self.weights = list(script), 0, []

    def validation_loss(self, model, device):
        assert not model.training and not torch.is_grad_enabled()
        self.weights.append(model.weight.detach().clone())
        self.calls += 1
        return self.script[self.calls - 1]


def test_early_stopping_stops_after_patience_evaluations_and_exports_the_best(tmp_path):
    # the best is the 2nd evaluation (step 8); three without a new best (ties included) stop it
    task = Scripted([3.0, 2.0, 2.5, 2.0, 2.4, 1.0])
    cfg = _cfg(tmp_path, eval_every=4, patience=3)
    model, path = trainloop.fit(task, cfg, _data(), progress=False)
    assert task.calls == 5 and model.training
    meta = trainloop.checkpoint.meta_of(Toy().read(path))
    assert meta["step"] == 20 and meta["stop_reason"] == "early stopping"
    assert (meta["val_best"], meta["val_best_step"], meta["val_bad"]) == (2.0, 8, 3)
    assert torch.equal(model.weight, task.weights[1])  # the best weights, not the last
    assert torch.equal(Toy().read(path)["model"]["weight"], task.weights[1])
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    assert [r["val_loss"] for r in rows] == ["3", "2", "2.5", "2", "2.4"]
    # a stopped run asked to resume stops at once, with the same export
    again = Scripted([0.5])
    model2, _ = trainloop.fit(again, cfg, _data(), progress=False)
    assert again.calls == 0 and torch.equal(model2.weight, task.weights[1])


def test_without_patience_the_run_keeps_its_budget_and_exports_the_best(tmp_path):
    task = Scripted([2.0, 1.0] + [5.0] * 18)
    model, path = trainloop.fit(task, _cfg(tmp_path, eval_every=4), _data(), progress=False)
    meta = trainloop.checkpoint.meta_of(Toy().read(path))
    assert task.calls == 20 and meta["stop_reason"] == "epochs" and meta["val_best_step"] == 8
    assert torch.equal(model.weight, task.weights[1])
    # no validation loss (a task without validation data): no best file, the last weights
    plain, _ = trainloop.fit(Toy(), _cfg(tmp_path / "plain", eval_every=4, patience=1), _data(),
                             progress=False)
    assert not (tmp_path / "plain" / trainloop.BEST_NAME).exists()
    with pytest.raises(trainloop.LoopError, match="eval_every and patience"):
        trainloop.fit(Toy(), _cfg(tmp_path / "bad", eval_every=0), _data(), progress=False)
