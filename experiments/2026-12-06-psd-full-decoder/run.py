"""The PSD long profile with its motion decoder at a chosen size (`motion_scale`: 1 full size, as
PSD decodes; 2 the profile's half size, upsampled).

    python experiments/2026-12-06-psd-full-decoder/run.py DATA OUT SEED SCALE [STEPS]

With STEPS the run is step-budgeted (for measuring pairs/s); without, the profile's time budget.
Score the model with `flowbench run psd --checkpoint OUT/model.pt --profile long --seeds SEED`.
"""
import sys

from baselines.psd.config import PROFILES
from baselines.psd.trainer import train


def main(data: str, out: str, seed: int, scale: int, steps: int | None) -> None:
    cfg = PROFILES["long"].replace(out=out, seed=seed, model={"motion_scale": scale})
    if steps is not None:  # a short measuring run: one start, a step budget
        cfg = cfg.replace(steps=steps, max_minutes=None, starts=1)
    print(train(cfg, data, progress=True))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), int(a[4]) if len(a) > 4 else None)
