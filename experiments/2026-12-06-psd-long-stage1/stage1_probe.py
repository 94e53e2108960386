"""The PSD probe on a run's stage-1 checkpoint: the dimensions a stage 2 would choose now (mean
posterior KL over the test pairs above `kl_active`, `trainer.choose_active`) are set active on
the loaded copy, and `baselines.psd.probe.probe` scores their masks and says which part motion
each encodes (`factor_codes`). Nothing is written back to the checkpoint.

    python experiments/2026-12-06-psd-long-stage1/stage1_probe.py MODEL DATA [N]

Prints the active dimensions, the one-to-one assignment, the assigned visible IoU and the
`factor_codes` (JSON) for the first N test pairs (default 500).
"""
import json
import sys

import numpy as np
import torch

from baselines.psd.checkpoint import load
from baselines.psd.config import TrainConfig
from baselines.psd.probe import probe
from baselines.psd.trainer import choose_active, posterior_stats
from geogen.dataset import open_split
from geogen.scene import own_motions
from geogen.schema import SLOTS

torch.set_num_threads(1)


def main(model_path: str, data: str, n: int) -> None:
    model = load(model_path)
    model.eval()
    test = open_split(data, "test").read(("frames", "flow", "visible", "pose", "present"), n,
                                         t={"frames": 0, "flow": 0, "visible": 0})
    if not model.stage2:
        kl, _ = posterior_stats(model, torch.from_numpy(np.asarray(test["flow"])),
                                torch.device("cpu"))  # (D,)
        model.set_active(choose_active(kl, TrainConfig().kl_active))
    found = probe(model, test["frames"], test["flow"], test["visible"], parts=SLOTS,
                  motions=own_motions(test["pose"]), present=test["present"])
    keep = ("active_dims", "assignment", "assigned_iou", "factor_codes")
    print(json.dumps({k: found[k] for k in keep}, indent=1, default=float))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 500)
