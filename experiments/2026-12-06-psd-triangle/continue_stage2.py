"""Copy a finished run's checkpoint to a new folder with another `w_local`, so that
`experiments/2026-12-05-psd-local-flow/run.py` given that folder, a longer budget and the new
`--w_local` resumes it: more of stage 2 at another local-motion weight from the same state.

    python experiments/2026-12-06-psd-triangle/continue_stage2.py SRC DST W_LOCAL
"""
import json
import sys
from pathlib import Path

import torch


def main(src: str, dst: str, w_local: float) -> None:
    blob = torch.load(Path(src) / "checkpoint.pt", weights_only=True)
    cfg = json.loads(blob["config"])
    cfg["w_local"], cfg["out"] = w_local, dst
    blob["config"] = json.dumps(cfg)
    Path(dst).mkdir(parents=True, exist_ok=False)
    torch.save(blob, Path(dst) / "checkpoint.pt")
    print(f"{dst}/checkpoint.pt: step {json.loads(blob['progress'])['step']}, w_local {w_local}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
