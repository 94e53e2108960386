"""Smoke-scale learning check: train the quick model at 32 px for MINUTES, then score trained
and untrained (same seed, no step) on the first TEST test pairs."""
import json, sys, time
from pathlib import Path
from baselines.motiongrouping import profile
from baselines.motiongrouping.trainer import fit, load_flow
from benchmark.evaluate import evaluate
from benchmark.registry import get_method

data, out, minutes, test, batch = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
flow = load_flow(data)
method = get_method("motiongrouping")
cfg = profile("quick", str(out / "trained")).replace(model={"image_size": 32}, max_minutes=minutes,
                                                    batch_size=batch, device="cpu", log_every=10)
t = time.monotonic()
trained = fit(cfg, flow, progress=False)
print("train wall", round(time.monotonic() - t), "s", flush=True)
untrained = fit(cfg.replace(out=str(out / "init"), lr=0.0, steps=1, max_minutes=None), flow, progress=False)
for name, ckpt in (("untrained", untrained), ("trained", trained)):
    m = evaluate(method, method.load(ckpt), data, random_state=0, test_limit=test, progress=False)
    print(name, json.dumps({k: m[k] for k in ("visible_iou", "visible_iou_per_image", "epe", "fg_ari") if k in m}), flush=True)
