"""A probe's quick score: the benchmark's segmentation and flow metrics on the first N test
pairs of a dataset, without the k-means features (which embed the whole train split).

    .venv/bin/python experiments/2026-12-01-flops/probe_eval.py RUN/model.pt DATA [N]
"""
import json
import sys
from pathlib import Path

from benchmark.datasets import read_checked
from benchmark.evaluate import EVAL_BATCH, TEST_FIELDS, predict
from benchmark.metrics import FlowScore, SegmentationScore
from benchmark.registry import get_method


def main(checkpoint: str, data: str, n: int = 200) -> None:
    method = get_method("flowcaps")
    loaded = method.load(Path(checkpoint))
    test = read_checked(Path(data), "test", TEST_FIELDS, n)
    seg, flow = None, FlowScore()
    for i in range(0, len(test["label"]), EVAL_BATCH):
        j = min(i + EVAL_BATCH, len(test["label"]))
        gt_flow = test["flow"][i:j, 0]  # (B, H, W, 2)
        pred = predict(method, loaded.model, test["frames"][i:j], gt_flow)
        seg = seg or SegmentationScore(K=pred.masks.shape[1])
        vis = test["visible"][i:j, 0]  # (B, H, W)
        seg.update(pred.masks, pred.visible, test["amodal"][i:j, 0], vis, test["present"][i:j])
        flow.update(pred.flow, gt_flow, vis)
    out = {**seg.compute(), **flow.compute()}
    keep = {"amodal_iou": out["amodal_iou"], "visible_iou": out.get("visible_iou"),
            "epe": out.get("epe"), "epe_fg": out.get("epe_fg"), "n_test": j}
    print(json.dumps(keep, default=float))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:4]))
