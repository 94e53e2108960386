"""Seconds per test batch of FlowCapsules' benchmark prediction under one setting.

Run once per setting, each in its own process (the allocator setting cannot be undone):

    python experiments/2026-11-28-eval-cost/time_predict.py CHECKPOINT DATA --batches 20 \
        [--bf16] [--keep-memory] [--batch 50] [--threads 2]

Prints one JSON line: the setting, seconds per batch (after one warm-up batch) and pairs/s.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from benchmark.datasets import read_checked
from benchmark.evaluate import TEST_FIELDS, predict
from benchmark.registry import get_method
from trainloop.allocator import keep_freed_memory


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("data", type=Path)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--keep-memory", action="store_true")
    a = ap.parse_args()
    if a.keep_memory:
        keep_freed_memory()
    torch.set_num_threads(a.threads)
    method = get_method("flowcaps")
    loaded = method.load(a.checkpoint)
    n = a.batch * (a.batches + 1)
    test = read_checked(a.data, "test", TEST_FIELDS, n)
    times = []
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        for i in range(0, n, a.batch):
            t = time.perf_counter()
            predict(method, loaded.model, test["frames"][i:i + a.batch], None)
            times.append(time.perf_counter() - t)
    per = sum(times[1:]) / len(times[1:])
    print(json.dumps({"bf16": a.bf16, "keep_memory": a.keep_memory, "batch": a.batch,
                      "threads": a.threads, "s_per_batch": round(per, 3),
                      "pairs_per_s": round(a.batch / per, 1)}))


if __name__ == "__main__":
    main()
