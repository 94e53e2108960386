"""The one error class of flowcaps: bad input, bad checkpoints, diverged training."""


class FlowcapsError(RuntimeError):
    """A user-facing failure with a one-line message; the CLI prints it without a traceback."""


class TrainingInterrupted(FlowcapsError):
    """Training stopped by SIGINT (Ctrl-C) after saving its checkpoint: resumable."""
