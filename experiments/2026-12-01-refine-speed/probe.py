"""Time flowcaps-refine's test predictions on the first N pairs and score them (the test half of
benchmark.evaluate: no k-means), optionally saving the predictions to compare two commits.

    python probe.py CHECKPOINT DATA N OUT.json [--save preds.npz] [--against preds.npz]
                    [--profile] [--batches B]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from benchmark.datasets import read_checked, read_manifest_checked, targets
from benchmark.evaluate import EVAL_BATCH, TEST_FIELDS, predict
from benchmark.metrics import AriScore, FlowScore, SegmentationScore
from benchmark.registry import get_method


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--method", default="flowcaps-refine")
    ap.add_argument("--save")
    ap.add_argument("--against")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    method = get_method(a.method)
    loaded = method.load(Path(a.checkpoint))
    test = read_checked(Path(a.data), "test", TEST_FIELDS, a.n)
    slots, _ = targets(read_manifest_checked(Path(a.data)))
    seg, flow, ari = None, FlowScore(), AriScore()
    saved: dict[str, list] = {"masks": [], "visible": []}
    times = []
    prof = None
    if a.profile:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    for i in range(0, a.n, EVAL_BATCH):
        j = min(i + EVAL_BATCH, a.n)
        gt_flow = test["flow"][i:j, 0]
        t0 = time.perf_counter()
        pred = predict(method, loaded.model, test["frames"][i:j], gt_flow)
        times.append(time.perf_counter() - t0)
        seg = seg or SegmentationScore(K=pred.masks.shape[1], names=slots)
        vis = test["visible"][i:j, 0]
        seg.update(pred.masks, pred.visible, test["amodal"][i:j, 0], vis, test["present"][i:j])
        flow.update(pred.flow, gt_flow, vis)
        ari.update(pred.visible, vis)
        saved["masks"].append(pred.masks)
        saved["visible"].append(pred.visible)
        print(f"batch {i // EVAL_BATCH}: {times[-1]:.2f} s", flush=True)
    if prof is not None:
        prof.__exit__(None, None, None)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    out = {**seg.compute(), **flow.compute(), **ari.compute(),
           "seconds_per_batch": times, "threads": torch.get_num_threads()}
    masks, visible = np.concatenate(saved["masks"]), np.concatenate(saved["visible"])
    if a.save:
        np.savez_compressed(a.save, masks=masks, visible=visible)
    if a.against:
        ref = np.load(a.against)
        out["max_abs_diff"] = {"masks": float(np.abs(ref["masks"] - masks).max()),
                               "visible": float(np.abs(ref["visible"] - visible).max())}
        out["flipped_at_0.5"] = {k: int(((ref[k] > 0.5) != (v > 0.5)).sum())
                                 for k, v in (("masks", masks), ("visible", visible))}
    Path(a.out).write_text(json.dumps(out, indent=1, default=float))
    print(json.dumps({k: out[k] for k in out if k != "seconds_per_batch"}, default=float)[:1500])
    print("mean s/batch", float(np.mean(times)), "first", times[0])


if __name__ == "__main__":
    main()
