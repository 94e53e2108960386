# Shared by the scoring scripts here: a checkpoint's amodal masks on the first N test pairs
# (frame 0) and the fixed capsule-to-slot assignment fitted on those pairs.
import numpy as np, torch, flowcaps
from geogen.dataset import read_split
from benchmark.metrics import SegmentationScore


def parse_test(ck, data, n, extra=()):
    """-> masks (N, K, H, W) probabilities, assignment (S,), the test fields read."""
    m = flowcaps.load(ck); m.eval()
    d = read_split(data, "test", ("frames", "amodal", "visible", "present") + tuple(extra), limit=n)
    sc = SegmentationScore(K=m.config.num_capsules); out = []
    for i in range(0, n, 200):
        img = torch.from_numpy(d["frames"][i:i+200, 0]).permute(0, 3, 1, 2).float() / 255  # (B, 3, H, W)
        with torch.no_grad(): c = m.parse(img)
        out.append(c.masks.numpy())
        sc.update(c.masks.numpy(), c.visible.numpy(), d["amodal"][i:i+200, 0], d["visible"][i:i+200, 0], d["present"][i:i+200])
    return np.concatenate(out), sc.assignment(), d
