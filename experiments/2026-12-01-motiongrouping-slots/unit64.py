"""Train Motion Grouping's quick profile on Geo (64 px) with another flow unit, as `flowbench run
motiongrouping --seeds 0` trains it otherwise (K 4, its run seed), then score it with
`flowbench run motiongrouping --checkpoint OUT/model.pt`.

    unit64.py DATA OUT FLOW_UNIT RUN_SEED
"""
import sys

from baselines.motiongrouping import profile, train

data, out, unit, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
cfg = profile("quick", out, num_slots=4).replace(seed=seed, device="cpu",
                                                 model={"image_size": 64, "flow_unit": unit})
print(train(cfg, data))
