"""The one error class of flowcaps: bad input, bad checkpoints, diverged training."""


class FlowcapsError(RuntimeError):
    """A user-facing failure with a one-line message; the CLI prints it without a traceback."""
