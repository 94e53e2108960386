"""Motion Grouping (Yang, Lamdouar, Lu, Zisserman, Xie: "Self-supervised Video Object
Segmentation by Motion Grouping", ICCV 2021) in PyTorch: a Slot Attention autoencoder over
optical flow, its losses and its trainer."""
from baselines.motiongrouping.checkpoint import load
from baselines.motiongrouping.config import PROFILES, ModelConfig, TrainConfig, profile
from baselines.motiongrouping.errors import MotionGroupingError
from baselines.motiongrouping.model import MotionGrouping, SlotAttention
from baselines.motiongrouping.trainer import train

__all__ = ["MotionGrouping", "MotionGroupingError", "ModelConfig", "PROFILES", "SlotAttention",
           "TrainConfig", "load", "profile", "train"]
