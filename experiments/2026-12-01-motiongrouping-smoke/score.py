"""Visible IoU (fixed and per image), EPE and FG-ARI of checkpoints on the first N test pairs."""
import json, sys
from pathlib import Path
from benchmark.datasets import read_checked
from benchmark.evaluate import predict, TEST_FIELDS
from benchmark.metrics import AriScore, FlowScore, SegmentationScore
from benchmark.registry import get_method
data, n = Path(sys.argv[1]), int(sys.argv[2])
method = get_method("motiongrouping")
test = read_checked(data, "test", TEST_FIELDS, n)
for ckpt in sys.argv[3:]:
    model = method.load(Path(ckpt)).model
    seg, flow, ari = None, FlowScore(), AriScore()
    for i in range(0, n, 25):
        gt = test["flow"][i:i + 25, 0]
        pred = predict(method, model, test["frames"][i:i + 25], gt)
        seg = seg or SegmentationScore(K=pred.masks.shape[1])
        vis = test["visible"][i:i + 25, 0]
        seg.update(pred.masks, pred.visible, test["amodal"][i:i + 25, 0], vis, test["present"][i:i + 25])
        flow.update(pred.flow, gt, vis); ari.update(pred.visible, vis)
    m = {**seg.compute(), **flow.compute(), **ari.compute()}
    print(ckpt, json.dumps({k: m[k] for k in ("visible_iou", "visible_iou_per_image", "epe", "fg_ari") if k in m}), flush=True)
