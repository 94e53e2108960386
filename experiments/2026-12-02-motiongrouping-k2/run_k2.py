"""Motion Grouping's quick profile at the official K = 2 on Geo: train, evaluate, write the
record (tagged K2) through the benchmark's runner, as `flowbench run` would with K set."""
import sys
from pathlib import Path

from benchmark.registry import Axes
from benchmark.runner import RunRequest, run

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
req = RunRequest(method="motiongrouping", dataset="geo", profile="quick", seeds=(seed,),
                 results=Path("runs/new"), variant=Axes(num_capsules=2))
for path in run(req):
    print("wrote", path)
