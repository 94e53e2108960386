"""Which of a PSD model's image-feature channels tell the triangle from the other shapes: for
each channel (one per latent dimension), its mean on the cells of the background and of each
part's visible pixels (frame 0, label at each feature cell's centre), in units of its spread
over the shapes' cells, and how far the triangle's mean lies from the nearer of the circle's
and the square's (the channel's triangle contrast). Printed for the ten channels of largest
contrast, with each dimension's mean posterior KL on the same pairs.

    python experiments/2026-12-06-psd-long-stage1/channels.py MODEL DATA [N]

MODEL is an exported `model.pt` or a run's `checkpoint.pt`; N test pairs (default 400).
"""
import sys

import numpy as np
import torch

from baselines.psd.checkpoint import load
from baselines.psd.trainer import posterior_stats
from geogen.dataset import open_split

torch.set_num_threads(1)


def main(model_path: str, data: str, n: int) -> None:
    model = load(model_path)
    model.eval()
    test = open_split(data, "test").read(("frames", "flow", "visible"), n,
                                         t={"frames": 0, "flow": 0, "visible": 0})
    with torch.no_grad():
        img = torch.from_numpy(np.asarray(test["frames"])).float().permute(0, 3, 1, 2) / 255
        feats = model.image_encoder(img).float()  # (N, D, h, w)
    kl, _ = posterior_stats(model, torch.from_numpy(np.asarray(test["flow"])),
                            torch.device("cpu"))  # (D,)
    step = img.shape[-1] // feats.shape[-1]
    labels = np.asarray(test["visible"])[:, step // 2::step, step // 2::step]  # (N, h, w)
    f = feats.permute(1, 0, 2, 3).reshape(feats.shape[1], -1).numpy()  # (D, N h w)
    lab = labels.reshape(-1)
    rows = []
    for d in range(f.shape[0]):
        spread = f[d][lab > 0].std() + 1e-6
        mu = [f[d][lab == k].mean() / spread for k in range(4)]  # bg, circle, square, triangle
        nearer = min(mu[1], mu[2], key=lambda m: abs(mu[3] - m))
        rows.append((d, kl[d], *mu, mu[3] - nearer))
    rows.sort(key=lambda r: -abs(r[-1]))
    print(f"{model_path}: active {model.active_dims()}")
    print("dim     KL  background  circle  square  triangle  triangle contrast")
    for d, k, *mu, contrast in rows[:10]:
        print(f"{d:3d} {k:6.2f} " + " ".join(f"{m:7.2f}" for m in mu) + f" {contrast:9.2f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 400)
