"""Score a checkpoint's masks against the foreground (the union of every part) rather than each
part: Motion Grouping's own task (one object against the background). Uses the benchmark's
segmentation score with one group holding all the data's slots, so the fixed assignment and
the per-image matching are the same rules as Table 1's, on the same test pairs.

    python experiments/2026-12-02-motiongrouping-k2/score_fg.py METHOD CHECKPOINT DATA [N] > OUT.json
"""
import json
import sys
from pathlib import Path

from benchmark.datasets import read_checked, read_manifest_checked, targets
from benchmark.evaluate import EVAL_BATCH, TEST_FIELDS, predict
from benchmark.metrics import SegmentationScore
from benchmark.registry import get_method

method = get_method(sys.argv[1])
loaded = method.load(Path(sys.argv[2]))
root = Path(sys.argv[3])
limit = int(sys.argv[4]) if len(sys.argv) > 4 else None
slots, _ = targets(read_manifest_checked(root))
test = read_checked(root, "test", TEST_FIELDS, limit)
n = len(test["label"])
score = None
for i in range(0, n, EVAL_BATCH):
    j = min(i + EVAL_BATCH, n)
    gt_flow = test["flow"][i:j, 0]  # (B, H, W, 2)
    pred = predict(method, loaded.model, test["frames"][i:j], gt_flow)
    score = score or SegmentationScore(K=pred.masks.shape[1], names=("foreground",),
                                       members=(tuple(range(len(slots))),))
    score.update(pred.masks, pred.visible, test["amodal"][i:j, 0], test["visible"][i:j, 0],
                 test["present"][i:j])
out = score.compute()
keep = ("visible_iou", "visible_iou_per_image", "visible_mbo", "amodal_iou",
        "visible_assignment", "count")
print(json.dumps({"method": method.name, "checkpoint": sys.argv[2], "data": str(root),
                  "n_test": n, "slots": list(slots), **{k: out[k] for k in keep}}, indent=1))
