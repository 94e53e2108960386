"""How much of each shape PSD's own trained model moves in each chosen dimension (its demo figures).

usage: python measure.py PSD_CHECKOUT/demo/figures
PSD's demo (zhenjia-xu/psd, commit 87edb60, `demo.py`) writes, for 8 demo pairs, the input frame
`{i}_image_input.png` and each chosen dimension's local motion (before the structure) as a flow
image `{i}_motion_{d}.png`, for the dimensions 18, 9 and 0 of its pretrained model. A flow image's
brightness (max over RGB) grows with the motion's magnitude and is 0 where nothing moves. Shapes
are found in the input frame by colour (one dominant channel, as the shapes data draws them);
each dimension's brightness over its own 99.5th percentile is averaged over each shape's pixels,
with the share of them above 1/2 (the threshold Table 1's masks use).
"""
import sys
from pathlib import Path

import numpy as np
from PIL import Image

CHANNELS = ("red", "green", "blue")


def main() -> None:
    root = Path(sys.argv[1])
    for i in range(8):
        frame = root / f"{i}_image_input.png"
        if not frame.exists():
            continue
        im = np.asarray(Image.open(frame).convert("RGB")).astype(int)  # (H, W, 3)
        spread = im.max(-1) - im.min(-1)  # (H, W): shapes are saturated, the background pale
        dominant = im.argmax(-1)  # (H, W)
        back = np.abs(im - np.median(im.reshape(-1, 3), 0)).max(-1) < 20  # (H, W)
        print(f"pair {i}")
        for d in (18, 9, 0):
            motion = np.asarray(Image.open(root / f"{i}_motion_{d}.png").convert("RGB"))
            level = motion.max(-1).astype(float)  # (H, W)
            level = level / max(np.percentile(level, 99.5), 1.0)
            parts = []
            for c, name in enumerate(CHANNELS):
                region = (spread > 120) & (dominant == c) & ~back
                if region.sum() >= 20:
                    parts.append(f"{name} shape {level[region].mean():.2f} "
                                 f"({(level[region] > 0.5).mean():.2f} above 1/2)")
            parts.append(f"background {level[back].mean():.2f}")
            print(f"  dimension {d:2d}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
