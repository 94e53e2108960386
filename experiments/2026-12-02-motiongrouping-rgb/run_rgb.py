"""Motion Grouping's quick profile reading the official's flow colour coding (`input_form="rgb"`,
its README's `--flow_to_rgb`) on Geo, K slots, the benchmark's run seed for Motion Grouping on
Geo seed 0 (55613873), so the committed seed-0 record differs from it by the input alone.

    python experiments/2026-12-02-motiongrouping-rgb/run_rgb.py K OUT
    flowbench run motiongrouping --checkpoint OUT/model.pt --results RECORDS --runs OUT/flowbench
"""
import sys

from baselines.motiongrouping import profile, train

k, out = int(sys.argv[1]), sys.argv[2]
cfg = profile("quick", out, num_slots=k).replace(seed=55613873, device="cpu",
                                                 model={"image_size": 64, "input_form": "rgb"})
print("wrote", train(cfg, "data/geo-quick"))
