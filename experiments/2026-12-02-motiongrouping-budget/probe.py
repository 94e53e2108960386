"""Train the quick network at the data's side with some changes for SECONDS of training time
in BATCH flows a step (all training pairs, the shared loop, seed 0: the same data order for
every batch size), then score its alphas on the first TEST test pairs: steps reached, visible
IoU (fixed, per image), mBO, FG-ARI, the alpha entropy, and where the alphas go (on 64 test
pairs: the largest correlation of one slot's alpha with the moving pixels, and each slot's mean
alpha on moving and on static pixels). A time budget, not a step budget, so that settings
compete at equal wall time.

    probe.py DATA OUT SECONDS BATCH TEST [key=value ...]

keys: any TrainConfig field (lr, warmup_steps, seed, log_every) or ModelConfig field, and pairs
(the training pairs read; all unless given); values are read as JSON.
"""
import dataclasses, json, sys, time
from pathlib import Path
import torch
import trainloop
from baselines.motiongrouping import ModelConfig, profile
from baselines.motiongrouping.trainer import MotionGroupingTask, load_flow
from benchmark.datasets import read_checked
from benchmark.evaluate import TEST_FIELDS, predict
from benchmark.metrics import AriScore, SegmentationScore
from benchmark.registry import get_method

data, out, seconds, batch, ntest = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
changes = {k: json.loads(v) for k, v in (a.split("=", 1) for a in sys.argv[6:])}
flow = load_flow(data, changes.pop("pairs", None))
size = flow.shape[1]
model_fields = {f.name for f in dataclasses.fields(ModelConfig)}
cfg = profile("quick", out).replace(
    model={"image_size": size, **{k: v for k, v in changes.items() if k in model_fields}},
    **{"max_minutes": seconds / 60, "steps": 10 ** 9, "batch_size": batch, "device": "cpu",
       "log_every": 25, **{k: v for k, v in changes.items() if k not in model_fields}})
tag = " ".join(sys.argv[6:]) or "base"
t = time.monotonic()
model, path = trainloop.fit(MotionGroupingTask(cfg), cfg.loop,
                            (torch.from_numpy(flow),), progress=False)
reached = trainloop.checkpoint.meta_of(torch.load(path, weights_only=True))["step"]
print(tag, "train wall", round(time.monotonic() - t), "s,", reached, "steps", flush=True)
model.eval()
method = get_method("motiongrouping")
test = read_checked(Path(data), "test", TEST_FIELDS, ntest)
seg, ari, ent = None, AriScore(), []
for i in range(0, ntest, 25):
    gt = test["flow"][i:i + 25, 0]
    pred = predict(method, model, test["frames"][i:i + 25], gt)
    seg = seg or SegmentationScore(K=pred.masks.shape[1])
    vis = test["visible"][i:i + 25, 0]
    seg.update(pred.masks, pred.visible, test["amodal"][i:i + 25, 0], vis,
               test["present"][i:i + 25])
    ari.update(pred.visible, vis)
    a = torch.as_tensor(pred.visible).float()
    ent.append((-(a * (a + 1e-5).log()).sum(1)).mean().item())
m = {**seg.compute(), **ari.compute()}
res = {"steps": reached}
res.update({k: round(float(m[k]["all"]), 3) for k in ("visible_iou", "visible_iou_per_image",
                                                      "visible_mbo")})
res["fg_ari"] = round(float(m["fg_ari"]), 3)
res["alpha_entropy"] = round(sum(ent) / len(ent), 3)
flows = torch.as_tensor(test["flow"][:64, 0]).float().permute(0, 3, 1, 2)  # (64, 2, H, W) px
with torch.no_grad():
    a = model(flows).alphas  # (64, K, H, W)
mv = (flows.norm(dim=1) > 0.05).float()[:, None]  # (64, 1, H, W)
centred = mv - mv.mean()
corr = [((ak - ak.mean()) * centred[:, 0]).sum() / ((ak - ak.mean()).norm() * centred.norm())
        for ak in a.unbind(1)]
res["motion_corr"] = round(max(c.item() for c in corr), 3)
res["alpha_moving"] = [round(v, 2) for v in ((a * mv).sum((0, 2, 3)) / mv.sum()).tolist()]
res["alpha_static"] = [round(v, 2) for v in ((a * (1 - mv)).sum((0, 2, 3))
                                              / (1 - mv).sum()).tolist()]
print(tag, json.dumps(res), flush=True)
