"""PSD's quick-profile model trained for a long budget with the local-motion sparsity on in
stage 2 (issue 50): does stage 2 turn the structure on, and does the circle's dimension leave
its children, when stage 1 has had several hundred thousand pairs?

    python experiments/2026-12-02-psd-long-wlocal/train.py OUT MINUTES SEED W_LOCAL

Data: data/geo-gpu (the gpu and long profiles' 100k Geo training pairs), made here by the
benchmark's own rule when missing. Resumable (the shared loop)."""
import sys
from pathlib import Path

import baselines.psd as psd
from baselines.psd.config import PROFILES
from benchmark import datasets
from benchmark.profiles import default_data_root

out = sys.argv[1]
minutes = float(sys.argv[2])
seed = int(sys.argv[3])
w_local = float(sys.argv[4])
root = default_data_root("geo", "gpu")
datasets.ensure(datasets.profile_config("geo", "gpu", root), root, may_make=True,
                own_folder=True)
cfg = PROFILES["quick"].replace(out=out, max_minutes=minutes, seed=seed, w_local=w_local)
cfg.validate()
print(psd.train(cfg, str(root)))
