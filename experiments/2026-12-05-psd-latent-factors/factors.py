"""Which of Geo's part motions each active latent dimension of a trained PSD encodes
(`baselines.psd.probe.factor_codes` on `geogen.scene.own_motions`), on the first N test pairs.

    python experiments/2026-12-05-psd-latent-factors/factors.py MODEL DATA [N]
"""
import json
import sys

import numpy as np
import torch

from baselines.psd.checkpoint import load
from baselines.psd.probe import factor_codes
from geogen.dataset import read_split
from geogen.scene import own_motions
from geogen.schema import SLOTS

torch.set_num_threads(1)


def main(model_path: str, data: str, n: int = 2000) -> None:
    model = load(model_path)
    test = read_split(data, "test", ("flow", "pose", "present"), limit=n)
    with torch.no_grad():
        mean = np.concatenate([
            model.encode(torch.from_numpy(np.asarray(test["flow"][i:i + 64, 0], np.float32))
                         .permute(0, 3, 1, 2))[0].double().numpy()
            for i in range(0, len(test["pose"]), 64)])  # (N, D)
    active = model.active_dims()
    out = factor_codes(mean[:, active], active, own_motions(test["pose"]), test["present"], SLOTS)
    print(json.dumps({"model": model_path, "data": data, "pairs": len(mean), **out}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2000)
