"""Baselines of the FlowCapsules paper (SCAE, PSD, R-NEM) in PyTorch."""
