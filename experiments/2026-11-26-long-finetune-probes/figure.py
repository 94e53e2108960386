# Frame | errors (white hit, red missed, blue false) | mask probability, one row per test pair:
#   python figure.py CHECKPOINT DATA SLOT CAPSULE I,J,... OUT.png
import sys, numpy as np, torch, flowcaps
from PIL import Image
from geogen.dataset import read_split
ck, data, slot, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]); idx = [int(x) for x in sys.argv[5].split(",")]
m = flowcaps.load(ck); m.eval()
d = read_split(data, "test", ("frames", "amodal"), limit=max(idx) + 1)
rows = []
for i in idx:
    img = torch.from_numpy(d["frames"][i:i+1, 0]).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad(): c = m.parse(img)
    p = c.masks[0, cap].numpy(); g = d["amodal"][i, 0, slot]
    err = np.zeros((64, 64, 3), np.uint8); err[g & (p > .5)] = 255; err[g & (p <= .5)] = (255, 0, 0); err[~g & (p > .5)] = (0, 0, 255)
    prob = np.repeat((p * 255).astype(np.uint8)[..., None], 3, 2)
    rows.append(np.concatenate([d["frames"][i, 0], err, prob], 1))
Image.fromarray(np.concatenate(rows, 0)).resize((192 * 4, 64 * len(idx) * 4), Image.NEAREST).save(sys.argv[6])
