"""The loop's two errors. Each method turns them into its own error class at its boundary
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

