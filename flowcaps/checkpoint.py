"""Checkpoints: a dict of tensors, numbers and JSON strings, safe for `weights_only=True`.

Two kinds share one format: the run's `checkpoint.pt` (with optimiser and progress, for
resuming) and the exported `model.pt` (config and weights only), in the file format of the
shared loop (`trainloop.checkpoint`).
"""
from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError
from flowcaps.model import FlowCapsules
from trainloop.checkpoint import Kind, meta_of, read_blob, write_blob  # noqa: F401  (this module's API)

FORMAT = "flowcaps-checkpoint-v1"
KIND = Kind(format=FORMAT, what="a flowcaps", error=FlowcapsError, config=TrainConfig,
            build=lambda cfg: FlowCapsules(cfg.model))
save, read, config_of, load_weights, load = (KIND.save, KIND.read, KIND.config_of,
                                             KIND.load_weights, KIND.load)
