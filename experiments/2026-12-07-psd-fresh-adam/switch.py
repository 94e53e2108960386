"""A finished PSD run's state at its switch to stage 2, rebuilt as a run checkpoint, so that the
run can be trained on from there under a config that differs in stage 2 only.

    python experiments/2026-12-07-psd-fresh-adam/switch.py RUN NEW [FIELD=VALUE ...]
    python experiments/2026-12-07-psd-fresh-adam/switch.py --check

RUN a finished run's folder (its `stage1.pt`, written at the switch, and its `checkpoint.pt`
and `log.csv`); NEW a new run folder, which receives `checkpoint.pt` (the stage-1 copy's
weights with its active dimensions set, a fresh Adam, the run's progress at the switch),
`stage1.pt` and the log's stage-1 rows. FIELD=VALUE change the run's config (JSON values;
default `stage2_fresh_optimizer=true`). The same command that trained RUN (with `--runs` at
NEW's parent) then trains stage 2 on. The training seconds at the switch are read off the
log (interpolated between its rows), so a time-budgeted stage 2 gets its own length.

This is exact only when the new config starts stage 2 with a fresh optimiser (a carried
Adam's state at the switch is not kept anywhere). `--check` proves it on a small run: from
scratch, and rebuilt from its own switch and trained on, the final weights are equal.
"""
import csv
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from baselines.psd import checkpoint
from baselines.psd.config import ModelConfig, TrainConfig
from baselines.psd.model import PSD
from baselines.psd.trainer import PsdTask, fit


def rebuild(run: Path, new: Path, changes: dict) -> None:
    final, stage1 = checkpoint.read(run / "checkpoint.pt"), checkpoint.read(run / "stage1.pt")
    cfg = checkpoint.config_of(final).replace(out=str(new), **changes)
    if not cfg.stage2_fresh_optimizer:
        sys.exit("switch.py: the new config must start stage 2 with a fresh optimiser")
    at = checkpoint.meta_of(stage1)  # step, kl, active_dims at the switch
    step = at["step"]
    model = PSD(cfg.model)
    model.load_state_dict(stage1["model"])
    model.set_active(at["active_dims"])
    opt = PsdTask(cfg, None, None).optimizer(model)  # the trainer's, nothing in its state yet
    rows = list(csv.DictReader(open(run / "log.csv")))
    steps = np.array([int(r["step"]) for r in rows])
    seconds = float(np.interp(step, steps, [float(r["seconds"]) for r in rows]))
    done = json.loads(final["progress"])
    progress = {"kl": at["kl"], "kl_step": step, "stage2_step": step,
                "pairs": step * cfg.batch_size, "step": step, "train_seconds": seconds,
                **{k: done[k] for k in ("start", "starts") if k in done}}
    new.mkdir(parents=True, exist_ok=False)
    shutil.copy(run / "stage1.pt", new / "stage1.pt")
    with open(new / "log.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if int(r["step"]) <= step)
    checkpoint.save(new / "checkpoint.pt", cfg, model, optimizer=opt, progress=progress,
                    meta=checkpoint.meta_of(final))
    print(f"{new / 'checkpoint.pt'}: step {step}, {seconds:.1f} s, active {at['active_dims']}")


def check() -> None:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(24, 2, 32, 32, 3), dtype=np.uint8)
    flow = rng.normal(0, 2, size=(24, 32, 32, 2)).astype(np.float16)
    model = ModelConfig(image_size=32, latent_dim=5, kernel_hidden=(8,), unet_width=4,
                        motion_scale=2, motion_kernels=(3,))
    with tempfile.TemporaryDirectory() as tmp:
        def cfg(name: str, fresh: bool) -> TrainConfig:
            return TrainConfig(model=model, out=f"{tmp}/{name}", seed=1, device="cpu",
                               threads=1, batch_size=4, steps=12, stage1_fraction=0.5,
                               active_pairs=8, kl_active=0.0, retry_steps=2, log_every=1,
                               probe_pairs=0, stage2_fresh_optimizer=fresh)
        straight = checkpoint.load(fit(cfg("straight", True), frames, flow, progress=False))
        fit(cfg("carried", False), frames, flow, progress=False)
        rebuild(Path(tmp) / "carried", Path(tmp) / "rebuilt", {"stage2_fresh_optimizer": True})
        again = checkpoint.load(fit(cfg("rebuilt", True), frames, flow, progress=False))
        carried = checkpoint.load(Path(tmp) / "carried" / "model.pt")
        same = all(torch.equal(a, b) for a, b in
                   zip(straight.state_dict().values(), again.state_dict().values()))
        differs = any(not torch.equal(a, b) for a, b in
                      zip(straight.state_dict().values(), carried.state_dict().values()))
        print(f"rebuilt and trained on == from scratch: {same}; carried Adam differs: {differs}")
        if not (same and differs):
            sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        check()
    else:
        fields = dict(arg.split("=", 1) for arg in sys.argv[3:]) or {"stage2_fresh_optimizer": "true"}
        rebuild(Path(sys.argv[1]), Path(sys.argv[2]), {k: json.loads(v) for k, v in fields.items()})
