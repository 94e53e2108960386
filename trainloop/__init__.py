"""The training loop every method shares (FlowCapsules and each baseline): a method supplies a
`Task`, the loop owns seeds, budget, schedule, guard, log, checkpoints, resume, Ctrl-C and DDP.

It imports no method: flowcaps and baselines import it."""
from trainloop.device import resolve_device
from trainloop.errors import LoopError, TimeGuardStop, TrainingInterrupted, errors_as
from trainloop import checkpoint
from trainloop.data import DATA, DATA_HASH, data_meta
from trainloop.progress import ramp
from trainloop.loop import (BEST_NAME, CKPT_NAME, LOG_NAME, MODEL_NAME, RESUMABLE, LoopConfig,
                            StepContext, Task, check_resume, config_difference, fit)

__all__ = ["BEST_NAME", "CKPT_NAME", "DATA", "DATA_HASH", "LOG_NAME", "LoopConfig", "checkpoint",
           "LoopError", "MODEL_NAME", "RESUMABLE", "StepContext", "Task", "TimeGuardStop",
           "TrainingInterrupted",
           "check_resume", "config_difference", "data_meta", "errors_as", "fit", "ramp",
           "resolve_device"]
