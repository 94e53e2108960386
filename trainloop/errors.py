"""The loop's errors. Each method turns them into its own error class at its boundary
(`errors_as`), so its command line and the benchmark catch one kind per method."""
from __future__ import annotations

import contextlib
from typing import Iterator


class LoopError(RuntimeError):
    """A failure with a one-line message: bad data for the loop, a diverged loss, a run folder
    that cannot be resumed."""


class TrainingInterrupted(LoopError):
    """Training stopped by SIGINT (Ctrl-C) after saving its checkpoint: resumable."""

    def __init__(self, checkpoint: object, step: int | None = None):
        self.checkpoint, self.step = checkpoint, step
        at = "" if step is None else f" at step {step}"
        super().__init__(f"interrupted{at}; resume with the same command (checkpoint {checkpoint})")


class TimeGuardStop(LoopError):
    """Training stopped by its time guard (LoopConfig.max_minutes) after saving its checkpoint:
    not a finished run, so no model is exported; a larger guard resumes it."""

    def __init__(self, checkpoint: object, step: int, total_steps: int, minutes: float):
        self.checkpoint, self.step = checkpoint, step
        super().__init__(f"stopped by the time guard ({minutes:g} min of training) at step "
                         f"{step} of {total_steps}: not a finished run, no model exported; "
                         f"checkpoint kept at {checkpoint}, a larger --max-minutes (or none) "
                         f"resumes it")


@contextlib.contextmanager
def errors_as(kind: type[Exception], interrupted: type[Exception] | None = None) -> Iterator[None]:
    """Re-raise the loop's errors as `kind` (an interrupt as `interrupted(checkpoint, step)` when
    given, else as `kind` with the same message), without the loop's traceback."""
    try:
        yield
    except TrainingInterrupted as err:
        if interrupted is not None:
            raise interrupted(err.checkpoint, err.step) from None
        raise kind(str(err)) from None
    except LoopError as err:
        raise kind(str(err)) from None

