"""The one error class of the R-NEM baseline."""


class RnemError(RuntimeError):
    """A user-facing failure with a one-line message: bad input, bad checkpoint, diverged run."""
