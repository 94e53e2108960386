"""Motion Grouping checkpoints in the shared file format (trainloop.checkpoint): the
run's `checkpoint.pt` also holds the optimiser and progress (for resuming); the exported
`model.pt` holds the config, weights and meta."""
from trainloop.checkpoint import Kind, meta_of, sha256  # noqa: F401  (part of this module's API)
from baselines.motiongrouping.config import TrainConfig
from baselines.motiongrouping.errors import MotionGroupingError
from baselines.motiongrouping.model import MotionGrouping

# v2: the network's flow unit (ModelConfig.flow_unit); a v1 model was trained in pixels.
FORMAT = "motiongrouping-checkpoint-v2"
KIND = Kind(format=FORMAT, what="a Motion Grouping", error=MotionGroupingError, config=TrainConfig,
            build=lambda cfg: MotionGrouping(cfg.model))
save, read, config_of, load_weights, load = (KIND.save, KIND.read, KIND.config_of,
                                             KIND.load_weights, KIND.load)
