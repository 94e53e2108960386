"""Guess What Moves (Choudhury, Karazija, Laina, Vedaldi, Rupprecht: "Guess What Moves:
Unsupervised Video and Image Segmentation by Anticipating Motion", BMVC 2022) in PyTorch: an
image segmentation network trained by fitting a parametric flow to each of its masks, its loss
and its trainer."""
from baselines.gwm.checkpoint import load
from baselines.gwm.config import PROFILES, ModelConfig, TrainConfig, masks_for, profile
from baselines.gwm.errors import GwmError
from baselines.gwm.model import MaskNet
from baselines.gwm.trainer import train

__all__ = ["GwmError", "MaskNet", "ModelConfig", "PROFILES", "TrainConfig", "load", "masks_for",
           "profile", "train"]
