"""The one error class of the Motion Grouping baseline: bad input, bad checkpoints, diverged
training."""


class MotionGroupingError(RuntimeError):
    """A user-facing failure with a one-line message (the adapter turns it into BenchmarkError)."""
