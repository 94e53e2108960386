import sys
from baselines.motiongrouping import profile
from baselines.motiongrouping.trainer import fit, load_flow
flow = load_flow(sys.argv[1])
cfg = profile("quick", sys.argv[2]).replace(model={"image_size": 32}, max_minutes=float(sys.argv[3]),
                                            batch_size=16, device="cpu", log_every=10)
print(fit(cfg, flow, progress=False))
