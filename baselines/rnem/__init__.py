"""R-NEM (van Steenkiste, Chang, Greff, Schmidhuber, ICLR 2018) for colour video, in PyTorch."""
from baselines.rnem.checkpoint import load
from baselines.rnem.config import PROFILES, ModelConfig, TrainConfig, profile
from baselines.rnem.errors import RnemError
from baselines.rnem.model import RNEM, State, e_step, schedule
from baselines.rnem.trainer import train

__all__ = ["PROFILES", "ModelConfig", "RNEM", "RnemError", "State", "TrainConfig", "e_step",
           "load", "profile", "schedule", "train"]
