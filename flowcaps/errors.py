"""The error class of flowcaps (bad input, bad checkpoints, diverged training) and its one kind,
an interrupted training run."""


class FlowcapsError(RuntimeError):
    """A user-facing failure with a one-line message; the CLI prints it without a traceback."""


class TrainingInterrupted(FlowcapsError):
    """Training stopped by SIGINT (Ctrl-C) after saving its checkpoint: resumable."""

    def __init__(self, checkpoint: object, step: int | None = None):
        at = "" if step is None else f" at step {step}"
        super().__init__(f"interrupted{at}; resume with the same command (checkpoint {checkpoint})")
