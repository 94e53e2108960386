"""Motion Grouping's quick profile reading the official's flow colour coding (`input_form="rgb"`,
its README's `--flow_to_rgb`), K slots, on a dataset folder, with a run seed (default: the
benchmark's for Motion Grouping on Geo seed 0, 55613873, so the committed seed-0 record differs
from it by the input alone). The config is the one `flowbench run motiongrouping` builds for
that seed, with the input changed.

    python experiments/2026-12-02-motiongrouping-rgb/run_rgb.py K OUT [SEED [DATA]]
    flowbench run motiongrouping --checkpoint OUT/model.pt --results RECORDS --runs OUT/flowbench
"""
import sys

from baselines.motiongrouping import profile, train

k, out = int(sys.argv[1]), sys.argv[2]
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 55613873
data = sys.argv[4] if len(sys.argv) > 4 else "data/geo-quick"
cfg = profile("quick", out, num_slots=k).replace(seed=seed, device="cpu",
                                                 model={"image_size": 64, "input_form": "rgb"})
print("wrote", train(cfg, data))
