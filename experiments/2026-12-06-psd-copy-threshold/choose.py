"""Which active dimensions a finished PSD run would choose under other `active_max_corr` values:
its live dimensions' KL and the correlations of their posterior means over the first training
pairs (the encoder is frozen in stage 2, so these are the numbers of the run's own switch).

    python experiments/2026-12-06-psd-copy-threshold/choose.py MODEL DATA [PAIRS]
"""
import sys

import numpy as np
import torch
from scipy.stats import spearmanr

from baselines.psd import checkpoint
from baselines.psd.data import load_train
from baselines.psd.model import PSD
from baselines.psd.trainer import choose_active, posterior_stats


def main(model_path: str, data: str, pairs: int) -> None:
    torch.set_num_threads(1)
    blob = checkpoint.read(model_path)
    cfg = checkpoint.config_of(blob)
    model = PSD(cfg.model)
    checkpoint.load_weights(model, blob["model"], model_path)
    model.eval()
    _, flow = load_train(data, pairs)
    kl, means = posterior_stats(model, torch.from_numpy(flow), torch.device("cpu"))
    live = [int(i) for i in np.argsort(-kl, kind="stable") if kl[i] > cfg.kl_active]
    print(f"run's active dimensions {model.active_dims()}; live by KL {live}: "
          f"{np.round(kl[live], 3).tolist()}")
    print("Pearson correlations of the live dimensions' means:")
    print(np.round(np.corrcoef(means[:, live], rowvar=False), 3))
    print("Spearman:")
    print(np.round(spearmanr(means[:, live]).correlation, 3))
    for corr in (1.0, 0.99, 0.9, 0.5, 0.3):
        print(f"active_max_corr {corr}: {choose_active(kl, cfg.kl_active, means, corr)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 512)
