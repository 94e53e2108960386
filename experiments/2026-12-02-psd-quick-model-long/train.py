"""PSD's quick-profile model trained for 140 minutes on the 100k Geo pairs (issue 50): does
PSD find one dimension per part when it sees ten times the quick profile's pairs?

    python experiments/2026-12-02-psd-quick-model-long/train.py OUT [MINUTES] [SEED]

Data: data/geo-gpu (the long profile's 100k training pairs). Resumable (the shared loop)."""
import sys

import baselines.psd as psd
from baselines.psd.config import PROFILES

out = sys.argv[1]
minutes = float(sys.argv[2]) if len(sys.argv) > 2 else 140.0
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
cfg = PROFILES["quick"].replace(out=out, max_minutes=minutes, seed=seed)
cfg.validate()
print(psd.train(cfg, "data/geo-gpu"))
