"""The budget: counted in rows (pairs), steps or epochs, and every schedule a function of the step
alone, so a machine's speed never changes what a run trains; time is only a guard that stops a
run, saves it, and says so."""
import csv
import itertools

import pytest
import torch

import trainloop
from trainloop import loop as loop_mod
from tests.test_trainloop import Toy, _cfg, _data


class Scheduled(Toy):
    """The toy with a schedule: its rate follows the run's fraction, which it also records."""

    def __init__(self):
        self.fractions: list[float] = []

    def lr_factor(self, step, fraction):
        self.fractions.append(fraction)
        return 1.0 - 0.9 * fraction


def _clock(seconds_per_call):
    """A stand-in for time.monotonic that runs `seconds_per_call` a reading: a slow machine."""
    ticks = itertools.count()
    return lambda: next(ticks) * seconds_per_call


def _rows(path):
    """The log's rows without its two timing columns (the machine's, not the run's)."""
    rows = list(csv.DictReader(open(path / "log.csv")))
    return [{k: v for k, v in r.items() if k not in ("seconds", "samples_per_s")} for r in rows]


def test_the_schedule_and_the_run_depend_on_the_step_alone(tmp_path, monkeypatch):
    fast = Scheduled()
    a, _ = trainloop.fit(fast, _cfg(tmp_path / "fast", rows=320), _data(),
                         progress=False)
    # The same run on a machine whose every clock reading is 100 s later: nothing changes.
    monkeypatch.setattr(loop_mod.time, "monotonic", _clock(100.0))
    slow = Scheduled()
    b, _ = trainloop.fit(slow, _cfg(tmp_path / "slow", rows=320), _data(),
                         progress=False)
    assert fast.fractions == slow.fractions == [s / 40 for s in range(40)]
    assert torch.equal(a.weight, b.weight)
    assert _rows(tmp_path / "fast") == _rows(tmp_path / "slow")
    assert [float(r["lr"]) for r in _rows(tmp_path / "slow")][:2] == pytest.approx(
        [0.1 * (1 - 0.9 * 3 / 40), 0.1 * (1 - 0.9 * 7 / 40)], rel=1e-2)


@pytest.mark.parametrize("rows, world, steps", [(320, 1, 40), (321, 1, 41), (320, 2, 20)])
def test_a_budget_in_rows_is_rows_over_the_global_batch_rounded_up(rows, world, steps):
    cfg = trainloop.LoopConfig(out="x", seed=0, batch_size=8, rows=rows, steps=5, epochs=3)
    assert loop_mod.budget_steps(cfg, steps_per_epoch=7, world=world) == steps
    cfg = trainloop.LoopConfig(out="x", seed=0, batch_size=8, steps=5, epochs=3)
    assert loop_mod.budget_steps(cfg, steps_per_epoch=7, world=world) == 5
    cfg = trainloop.LoopConfig(out="x", seed=0, batch_size=8, epochs=3)
    assert loop_mod.budget_steps(cfg, steps_per_epoch=7, world=world) == 21


def test_minutes_alone_are_no_budget():
    with pytest.raises(trainloop.LoopError, match="needs a budget.*only a guard"):
        trainloop.LoopConfig(out="x", seed=0, batch_size=8, max_minutes=5.0).validate()
    with pytest.raises(trainloop.LoopError, match="must be >= 1"):
        trainloop.LoopConfig(out="x", seed=0, batch_size=8, rows=0).validate()


def test_the_time_guard_stops_and_saves_and_a_resume_ends_as_an_uninterrupted_run(
        tmp_path, monkeypatch):
    straight, _ = trainloop.fit(Scheduled(), _cfg(tmp_path / "a", rows=320),
                                _data(), progress=False)
    monkeypatch.setattr(loop_mod.time, "monotonic", _clock(1.0))  # each step: about 1 s
    with pytest.raises(trainloop.TimeGuardStop, match=r"time guard \(0.25 min of training\) "
                                                      r"at step \d+ of 40: not a finished run"):
        trainloop.fit(Scheduled(), _cfg(tmp_path / "b", rows=320, max_minutes=0.25),
                      _data(), progress=False)
    assert (tmp_path / "b" / "checkpoint.pt").exists()
    assert not (tmp_path / "b" / "model.pt").exists()  # a stopped run is no result
    resumed, _ = trainloop.fit(Scheduled(), _cfg(tmp_path / "b", rows=320), _data(),
                               progress=False)
    assert torch.equal(straight.weight, resumed.weight)
