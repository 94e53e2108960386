"""Guess What Moves checkpoints in the shared file format (trainloop.checkpoint): the run's
`checkpoint.pt` also holds the optimiser and progress (for resuming); the exported `model.pt`
holds the config, weights and meta."""
from trainloop.checkpoint import Kind, meta_of, sha256  # noqa: F401  (part of this module's API)
from baselines.gwm.config import TrainConfig
from baselines.gwm.errors import GwmError
from baselines.gwm.model import MaskNet

FORMAT = "gwm-checkpoint-v1"
KIND = Kind(format=FORMAT, what="a Guess What Moves", error=GwmError, config=TrainConfig,
            build=lambda cfg: MaskNet(cfg.model))
save, read, config_of, load_weights, load = (KIND.save, KIND.read, KIND.config_of,
                                             KIND.load_weights, KIND.load)
