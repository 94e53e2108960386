"""How far a training run is, and its progress bar: over minutes for a time-budgeted run (its
step count is only an upper bound), over steps otherwise; either way the bar fills when the
run ends and its remaining time is the run's."""
from __future__ import annotations

import math

from tqdm import tqdm


def run_fraction(step: int, total_steps: int, seconds: float, budget: float) -> float:
    """How far the run is: the larger of its step and time fractions (`budget` in seconds, inf
    for none). The schedules follow it, and the run ends when it reaches 1."""
    return max(step / total_steps, seconds / budget)


def ramp(fraction: float, span: float) -> float:
    """A schedule's warm-up factor at `fraction` of the run: rising linearly from 0 to 1 over
    its first `span`, then 1; always 1 for a span of 0 (no warm-up)."""
    return 1.0 if span <= 0 else min(1.0, max(0.0, fraction) / span)


def bar_total(total_steps: int, budget: float) -> tuple[float, str]:
    """The progress bar's total and unit: minutes of training when a time budget is set (its
    steps are an upper bound the budget usually cuts short), else steps."""
    return (budget / 60, "min") if math.isfinite(budget) else (total_steps, "step")


def bar_position(step: int, total_steps: int, seconds: float, budget: float) -> float:
    """Where the bar stands, in `bar_total`'s unit. With a budget, the run's fraction of it, so
    the bar fills when the run ends, whichever of its limits comes first."""
    if not math.isfinite(budget):
        return step
    return min(run_fraction(step, total_steps, seconds, budget), 1.0) * budget / 60


def training_bar(total_steps: int, budget: float, state: dict, disable: bool,
                 desc: str = "train") -> tqdm:
    """The bar, started where `state` (step, train_seconds) is: a resumed run's place."""
    total, unit = bar_total(total_steps, budget)
    return tqdm(total=total, initial=bar_position(state["step"], total_steps,
                                                  state["train_seconds"], budget),
                disable=disable, desc=desc, unit=unit,
                bar_format=None if unit == "step" else
                "{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} min of training "
                "[{elapsed}<{remaining}{postfix}]")
