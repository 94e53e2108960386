"""FlowCapsules: capsule encoder, implicit mask decoder, depth-ordered layering."""
from flowcaps.checkpoint import load
from flowcaps.config import PROFILES, ModelConfig, TrainConfig
from flowcaps.errors import FlowcapsError
from flowcaps.model import Capsules, FlowCapsules
from flowcaps.trainer import train

__all__ = ["Capsules", "FlowCapsules", "FlowcapsError", "ModelConfig", "PROFILES", "TrainConfig",
           "load", "train"]
