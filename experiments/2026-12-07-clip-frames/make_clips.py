"""Geo clips of T frames at 64 px for the clip trials: usage make_clips.py T N (N training clips)."""
import sys, dataclasses
from pathlib import Path
from benchmark import datasets as d
t, n = int(sys.argv[1]), int(sys.argv[2])
root = Path(f"data/geo-quick-t{t}-n{n}")
cfg = dataclasses.replace(d.make_config("geo", root, n=n, val=0, test=100, size=64, frames=t), workers=1)
d.ensure(cfg, root, may_make=True, own_folder=True, progress=False)
print(root, "done")
