"""The starts of the long profile's stage 1 alone (`baselines.psd.starts`), step-budgeted so that
the machine's load does not change them: which start would a run choose, and what has each
start's stage 1 learned (the PSD probe's `factor_codes` on test pairs)?

    python experiments/2026-12-06-psd-starts/starts_trial.py DATA OUT SEED [STARTS] [STEPS]

STEPS (default 60,000, about the long profile's 160 minutes at 100 pairs/s in batches of 16)
stands in for the profile's time budget, so each start trains `start_fraction` x STEPS steps on
the same schedule. Prints one line per start (seed, score, live dimensions and the part motion
each encodes) and the start the rule chooses; writes OUT/trial.json.
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch

from baselines.psd import checkpoint
from baselines.psd.config import PROFILES
from baselines.psd.data import load_train
from baselines.psd.probe import probe
from baselines.psd.starts import begin_with_best_start, start_loop, start_score
from baselines.psd.trainer import PsdTask, choose_active, posterior_stats
from geogen.dataset import open_split
from geogen.scene import own_motions
from geogen.schema import SLOTS

PROBE_PAIRS = 500


def main(data: str, out: str, seed: int, starts: int, steps: int) -> None:
    cfg = PROFILES["long"].replace(out=out, seed=seed, starts=starts, steps=steps,
                                   max_minutes=None)
    frames, flow = load_train(data)
    frames_t, flow_t = torch.from_numpy(frames), torch.from_numpy(flow)
    begin_with_best_start(cfg, lambda **kw: PsdTask(cfg, frames_t, flow_t, **kw),
                          (frames_t, flow_t), progress=True, meta=None)
    chosen = json.loads(checkpoint.read(Path(out) / "checkpoint.pt")["progress"])["start"]
    test = open_split(data, "test").read(("frames", "flow", "pose", "visible", "present"),
                                         PROBE_PAIRS, t={"frames": 0, "flow": 0, "visible": 0})
    torch.set_num_threads(1)
    rows = []
    for i in range(starts):
        folder = Path(start_loop(cfg, i).out)
        model = checkpoint.load(folder / "checkpoint.pt")
        model.eval()
        kl, means = posterior_stats(model, torch.from_numpy(test["flow"]), torch.device("cpu"))
        live = choose_active(kl, cfg.kl_active, means, cfg.active_max_corr)
        model.set_active(live)
        found = probe(model, test["frames"], test["flow"], test["visible"], parts=SLOTS,
                      motions=own_motions(test["pose"]), present=test["present"])
        codes = {d["dim"]: {p: r for p, r in d["r2"].items() if r > 0.1}
                 for d in found["factor_codes"]["dims"]}
        rows.append({"start": i, "seed": start_loop(cfg, i).seed,
                     "score": round(start_score(folder / "log.csv"), 4),
                     "kl": {int(d): round(float(kl[d]), 3) for d in np.flatnonzero(kl > cfg.kl_active)},
                     "codes": codes, "held": found["factor_codes"]["held"]})
        print(json.dumps(rows[-1]))
    print("chosen:", chosen)
    (Path(out) / "trial.json").write_text(json.dumps({"chosen": chosen, "starts": rows},
                                                      indent=1) + "\n")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]) if len(a) > 3 else 3, int(a[4]) if len(a) > 4 else 60000)
