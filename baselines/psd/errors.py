"""The one error class of the PSD baseline: bad input, bad checkpoints, diverged training."""


class PsdError(RuntimeError):
    """A user-facing failure with a one-line message (the adapter turns it into BenchmarkError)."""
