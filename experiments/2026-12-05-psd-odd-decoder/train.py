"""PSD's quick profile with one model switch flipped, seeded as `flowbench run psd` seeds it
(issue 50: the odd motion decoder, measured alone against the faithful setting).

    python experiments/2026-12-05-psd-odd-decoder/train.py OUT SEED ODD

SEED is the benchmark's seed (0, 1, 2); ODD is 1 for `model.odd_motion=True`, 0 for the faithful
decoder. Data: data/geo-quick (the quick profile's, made by the benchmark's rule when missing).
Resumable (the shared loop). Score with `flowbench run psd --checkpoint OUT/model.pt --seeds SEED`.
"""
import sys

import baselines.psd as psd
from baselines.psd.config import PROFILES
from benchmark import datasets
from benchmark.profiles import default_data_root
from benchmark.runner import derive_seed

out, seed, odd = sys.argv[1], int(sys.argv[2]), bool(int(sys.argv[3]))
root = default_data_root("geo", "quick")
datasets.ensure(datasets.profile_config("geo", "quick", root), root, may_make=True,
                own_folder=True)
cfg = PROFILES["quick"].replace(out=out, seed=derive_seed(seed, "psd", "geo"),
                               model={"odd_motion": odd})
cfg.validate()
print(psd.train(cfg, str(root)))
