"""PSD checkpoints in the shared file format (trainloop.checkpoint): the run's
`checkpoint.pt` also holds the optimiser and progress (for resuming); the exported `model.pt`
holds the config, weights and meta."""
from trainloop.checkpoint import Kind, meta_of, sha256  # noqa: F401  (part of this module's API)
from baselines.psd.config import TrainConfig
from baselines.psd.errors import PsdError
from baselines.psd.model import PSD

FORMAT = "psd-checkpoint-v1"
KIND = Kind(format=FORMAT, what="a PSD", error=PsdError, config=TrainConfig,
            build=lambda cfg: PSD(cfg.model))
save, read, config_of, load_weights, load = (KIND.save, KIND.read, KIND.config_of,
                                             KIND.load_weights, KIND.load)
