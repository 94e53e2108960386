"""How far a training run is, and its progress bar. The run's fraction is its step over its
step budget and nothing else: the schedules that follow it (learning rate, warm-ups, fades,
stages) are then the same on every machine, whatever its speed. Time is only a guard
(LoopConfig.max_minutes) that stops a run; it never moves a schedule."""
from __future__ import annotations

from tqdm import tqdm


def run_fraction(step: int, total_steps: int) -> float:
    """How far the run is: `step` of `total_steps`. The schedules follow it, and the run ends
    when it reaches 1."""
    return step / total_steps


def ramp(fraction: float, span: float) -> float:
    """A schedule's warm-up factor at `fraction` of the run: rising linearly from 0 to 1 over
    its first `span`, then 1; always 1 for a span of 0 (no warm-up)."""
    return 1.0 if span <= 0 else min(1.0, max(0.0, fraction) / span)


def training_bar(total_steps: int, state: dict, disable: bool, desc: str = "train") -> tqdm:
    """The bar over the run's steps, started where `state` (its step) is: a resumed run's place."""
    return tqdm(total=total_steps, initial=state["step"], disable=disable, desc=desc, unit="step")
