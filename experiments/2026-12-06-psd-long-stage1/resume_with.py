"""Copy a run's checkpoint (a stage-1 copy, say) to a new run folder with some training fields
changed, so that `experiments/2026-12-05-psd-local-flow/run.py` given that folder and the same
fields as flags resumes it from the same state: stage-2 variants from one stage 1.

    python experiments/2026-12-06-psd-long-stage1/resume_with.py CHECKPOINT DST [FIELD=VALUE ...]

VALUE is read as JSON (a number, true/false); a field the checkpoint predates is added; `out`
is set to DST.
"""
import json
import sys
from pathlib import Path

import torch

from baselines.psd.config import TrainConfig


def main(src: str, dst: str, changes: list[str]) -> None:
    blob = torch.load(src, weights_only=True)
    cfg = json.loads(blob["config"])
    for change in changes:
        field, value = change.split("=", 1)
        if field not in TrainConfig.__dataclass_fields__:
            raise SystemExit(f"no training field {field!r}")
        cfg[field] = json.loads(value)
    cfg["out"] = dst
    blob["config"] = json.dumps(cfg, sort_keys=True)
    Path(dst).mkdir(parents=True, exist_ok=False)
    torch.save(blob, Path(dst) / "checkpoint.pt")
    step = json.loads(blob["progress"])["step"]
    print(f"{dst}/checkpoint.pt: step {step}, {' '.join(changes) or 'unchanged'}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
