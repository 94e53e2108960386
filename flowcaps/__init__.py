"""FlowCapsules: capsule encoder, implicit mask decoder, depth-ordered layering."""
from flowcaps.checkpoint import load
from flowcaps.config import ModelConfig, RefineConfig, TrainConfig
from flowcaps.errors import FlowcapsError
from flowcaps.model import Capsules, FlowCapsules
from flowcaps.profiles import PROFILES
from flowcaps.refine import parse_refined, refine_poses
from flowcaps.trainer import train

__all__ = ["Capsules", "FlowCapsules", "FlowcapsError", "ModelConfig", "PROFILES", "RefineConfig",
           "TrainConfig", "load", "parse_refined", "refine_poses", "train"]
