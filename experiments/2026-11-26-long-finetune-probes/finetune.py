# Fine-tune a trained checkpoint under changed loss settings (run from the repository root):
#   FT_DATA=data/geo-gpu python finetune.py SRC OUT MINUTES key=value ...
# The weights start from SRC; the optimizer, schedule and step count start afresh.
import sys, json, torch
from flowcaps import checkpoint
from flowcaps.cli import _parse_set
from flowcaps.model import FlowCapsules
from flowcaps.trainer import load_pairs, fit
src, out, minutes = sys.argv[1], sys.argv[2], float(sys.argv[3])
blob = checkpoint.read(src)
cfg = checkpoint.config_of(blob)
changes = {"out": out, "max_minutes": minutes, "lr": 5e-4, "warmup_steps": 50, "prior_anneal": 0.0,
           "center_warmup": 0.0, "cpu_ranks": 1, "threads": 1, "seed": 7}
changes.update(_parse_set(tuple(sys.argv[4:])))
cfg = cfg.replace(**changes)
model = FlowCapsules(cfg.model)
w = dict(blob["model"])
missing = model.load_state_dict(w, strict=False)
print("load", missing)
from pathlib import Path
Path(out).mkdir(parents=True, exist_ok=True)
checkpoint.save(Path(out) / "checkpoint.pt", cfg, model, progress={"step": 0, "train_seconds": 0.0, "pairs": 0})
import os; pairs = load_pairs(os.environ.get("FT_DATA", "data/geo-quick"), "train")
fit(cfg, pairs, progress=False)
