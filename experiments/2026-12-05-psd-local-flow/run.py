"""PSD's quick profile trained on Geo's flow with the parent's motion taken off the children
(the square's and the triangle's visible pixels lose the circle's (m, m)), then probed on the
test pairs treated the same way: does our PSD give each part a dimension of its own when the
parts' motions are independent (no hierarchy)?

    python experiments/2026-12-05-psd-local-flow/run.py DATA OUT SEED [MINUTES] [--global] [--odd]
        [--w_kl=X] [--w_local=X] [--kl_warmup=X] [--lr=X] [--active_max_corr=X]

`--global` trains on the unchanged flow (the control); `--odd` turns on the odd motion decoder
(`model.odd_motion`, a deviation from PSD's code); `--w_kl=X`, `--w_local=X`, `--kl_warmup=X` and
`--lr=X` set those training fields (the profile's otherwise: 0.01, 0, 0 and 2e-3);
`--active_max_corr=X` (added 2026-12-06) too (otherwise 1.0, off). Prints the probe's record
as JSON and writes it to OUT/probe.json.
"""
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import torch

from baselines.psd.checkpoint import load
from baselines.psd.config import PROFILES
from baselines.psd.data import load_train
from baselines.psd.probe import probe
from baselines.psd.trainer import fit
from geogen.dataset import open_split
from geogen.scene import own_motions
from geogen.schema import SLOTS

PROBE_PAIRS = 1000


def local_flow(flow: np.ndarray, pose: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """flow (N, H, W, 2), pose (N, T, S, 4), visible (N, H, W) -> the flow with the circle's
    frame-0 -> 1 velocity subtracted on the children's (square, triangle) visible pixels."""
    parent = (pose[:, 1, 0, :2] - pose[:, 0, 0, :2]).astype(np.float32)   # (N, 2) pixels
    child = (visible >= 2)[..., None]                                      # (N, H, W, 1)
    return (flow.astype(np.float32) - child * parent[:, None, None, :]).astype(flow.dtype)


def main(data: str, out: str, seed: int, minutes: float, use_global: bool, odd: bool,
         weights: dict) -> None:
    frames, flow = load_train(data)
    train = open_split(data, "train").read(("pose", "visible"), t={"visible": 0})
    if not use_global:
        flow = local_flow(flow, train["pose"], train["visible"])
    cfg = PROFILES["quick"].replace(out=out, seed=seed, max_minutes=minutes, **weights,
                                    model={"odd_motion": odd})
    model_path = fit(cfg, frames, flow, visible=train["visible"][:cfg.probe_pairs],
                     parts=SLOTS, meta={"experiment": "psd-local-flow", "global": use_global,
                           "odd": odd})
    test = open_split(data, "test").read(("frames", "flow", "pose", "visible", "present"),
                                         PROBE_PAIRS, t={"frames": 0, "flow": 0, "visible": 0})
    tflow = test["flow"] if use_global else local_flow(test["flow"], test["pose"], test["visible"])
    model = load(model_path)
    torch.set_num_threads(1)
    found = probe(model, test["frames"], tflow, test["visible"], parts=SLOTS,
                  motions=own_motions(test["pose"]), present=test["present"])
    found["config"] = dataclasses.asdict(cfg)
    text = json.dumps(found, indent=2, sort_keys=True)
    (Path(out) / "probe.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0], args[1], int(args[2]), float(args[3]) if len(args) > 3 else 22.0,
         "--global" in sys.argv, "--odd" in sys.argv,
         {a[2:].split("=", 1)[0]: float(a.split("=", 1)[1]) for a in sys.argv
          if a.startswith(("--w_kl=", "--w_local=", "--kl_warmup=", "--lr=",
                           "--active_max_corr="))})
