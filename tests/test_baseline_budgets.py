"""Every baseline's profiles are budgeted in steps at a fixed batch, never in minutes: the same
command trains the same steps on every machine, and time is only the loop's guard (None or 0 in
every profile). What the shared loop receives is checked, so a profile that drops the budget
or turns a guard into one fails too; and each adapter's budget line states the steps."""
import re

import pytest

from baselines.gwm.config import PROFILES as GWM_PROFILES
from baselines.motiongrouping.config import PROFILES as MG_PROFILES
from baselines.psd.config import FAITHFUL, PROFILES as PSD_PROFILES
from baselines.psd.starts import start_loop
from baselines.rnem import trainer as rnem_trainer
from baselines.rnem.config import PROFILES as RNEM_PROFILES
from baselines.scae import profile as scae_profile
from benchmark.registry import get_method

SCAE_PROFILES = ("smoke", "quick", "gpu")
NO_BUDGET = 10_000_000  # the dataclasses' "train until stopped" defaults: no profile's budget


def _scae(kind, name, dataset="geo"):
    return scae_profile(kind, name, dataset)


def _steps(method: str, name: str) -> int:
    """The step budget of a method's profile, from its config."""
    if method == "psd":
        return PSD_PROFILES[name].loop.steps
    if method == "rnem":
        return RNEM_PROFILES[name].loop.steps
    if method == "motiongrouping":
        return MG_PROFILES[name].loop.steps
    if method == "gwm":
        return GWM_PROFILES[name].loop.steps
    return _scae(method, name).loop.steps


def _loops():
    """(label, the config's guard, the LoopConfig it trains with) for every profile."""
    for name, cfg in {**PSD_PROFILES, "faithful": FAITHFUL}.items():
        yield f"psd {name}", cfg.loop.max_minutes, cfg.loop
        for i in range(cfg.starts if cfg.starts > 1 else 0):
            yield f"psd {name} start {i}", cfg.loop.max_minutes, start_loop(cfg, i)
    for name, cfg in RNEM_PROFILES.items():
        yield f"rnem {name}", cfg.loop.max_minutes, rnem_trainer.run_loop(cfg, rows=40_000)
    for kind in ("scae", "flowscae"):
        for name in SCAE_PROFILES:
            for dataset in ("geo", "geo+"):
                cfg = _scae(kind, name, dataset)
                yield f"{kind} {name} {dataset}", cfg.loop.max_minutes, cfg.loop
    for name, cfg in MG_PROFILES.items():
        yield f"motiongrouping {name}", cfg.loop.max_minutes, cfg.loop
    for name, cfg in GWM_PROFILES.items():
        yield f"gwm {name}", cfg.loop.max_minutes, cfg.loop


LOOPS = list(_loops())


@pytest.mark.parametrize("label, guard, loop", LOOPS, ids=[x[0] for x in LOOPS])
def test_every_profile_is_budgeted_in_steps_and_has_no_time_budget(label, guard, loop):
    assert guard in (None, 0), f"{label} sets max_minutes {guard}: a budget in time"
    assert loop.max_minutes is None
    assert loop.rows is None and loop.epochs is None
    assert isinstance(loop.steps, int) and 1 <= loop.steps < NO_BUDGET, (label, loop.steps)
    loop.validate()


def test_r_nem_keeps_its_early_stopping_under_the_step_budget():
    for name, cfg in RNEM_PROFILES.items():
        loop = rnem_trainer.run_loop(cfg, rows=40_000)
        assert loop.patience == cfg.loop.patience == 10 and loop.eval_every, name
        assert loop.steps == cfg.loop.steps


@pytest.mark.parametrize("method", ["psd", "rnem", "scae", "flowscae", "motiongrouping",
                                    "gwm"])
def test_each_budget_line_states_its_step_budget(method):
    """`flowbench list` prints these lines: each names its profile's steps, so a budget
    changed in a config and not in its line fails here."""
    for name, line in get_method(method).budgets.items():
        steps = f"{_steps(method, name):,}"
        assert re.search(rf"(?<![\d,]){steps} (OCAE )?steps", line), (name, steps, line)
