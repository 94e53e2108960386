"""SCAE checkpoints in the shared file format (trainloop.checkpoint): the run's
`checkpoint.pt` also holds the optimiser and progress (for resuming); the exported `model.pt`
holds the config, weights and meta."""
from trainloop.checkpoint import Kind, meta_of, sha256  # noqa: F401  (part of this module's API)
from baselines.scae.config import SCAEConfig
from baselines.scae.errors import ScaeError
from baselines.scae.model import build

FORMAT = "scae-checkpoint-v1"
KIND = Kind(format=FORMAT, what="an SCAE", error=ScaeError, config=SCAEConfig,
            build=build)
save, read, config_of, load_weights, load = (KIND.save, KIND.read, KIND.config_of,
                                             KIND.load_weights, KIND.load)
