"""The one error class of the Guess What Moves baseline: bad input, bad checkpoints, diverged
training."""


class GwmError(RuntimeError):
    """A user-facing failure with a one-line message (the adapter turns it into BenchmarkError)."""
