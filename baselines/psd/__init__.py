"""PSD (Xu, Liu, Sun, Murphy, Freeman, Tenenbaum, Wu: "Unsupervised Discovery of Parts,
Structure, and Dynamics", ICLR 2019) in PyTorch: model, losses, two-stage trainer."""
from baselines.psd.checkpoint import load
from baselines.psd.config import PROFILES, ModelConfig, TrainConfig
from baselines.psd.errors import PsdError
from baselines.psd.model import PSD
from baselines.psd.trainer import train

__all__ = ["ModelConfig", "PROFILES", "PSD", "PsdError", "TrainConfig", "load", "train"]
