"""Contact sheet of the default Geo+ texture bank (the paper look) and a few samples of each look.

Run from the repository root: python experiments/2026-12-07-geoplus-textures/make_sheet.py
Writes textures.png (each source: the whole texture, then a 24 px shape's view of it at 4x) and
samples.png (frame 0 of test samples 0-7 at 64 px, paper look above, camouflage below).
"""
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from geogen import appearance as A
from geogen.make import MakeConfig, render_one
from geogen.sources import default_textures

HERE = Path(__file__).resolve().parent
TILE, SHAPE, ZOOM = 96, 24, 4  # thumbnail side; shape size in output pixels; its enlargement


def shape_view(bank, index: int) -> np.ndarray:
    """(SHAPE * ZOOM, SHAPE * ZOOM) grey: what a SHAPE-pixel shape shows of source `index`
    (the renderer's lookup: a mid-range scale, at the mip level of SHAPE pixels per size)."""
    levels = bank.pyramid[index]
    span = 0.5 * min(levels[0].shape[:2])
    k = A.mip_level(levels, span / SHAPE)
    fill = A.TextureFill(levels[k], (levels[k].shape[1] / 2, levels[k].shape[0] / 2),
                         span / 2 ** k, 0.3, (1.0, 1.0, 1.0), index)
    g = (np.arange(SHAPE) + 0.5) / SHAPE - 0.5
    rgb = fill.colour(np.stack(np.meshgrid(g, g), -1))  # (SHAPE, SHAPE, 3)
    return np.kron(rgb[..., 0], np.ones((ZOOM, ZOOM)))


def main() -> None:
    bank = A.prepare_textures(default_textures(min_side=A.TextureConfig().work_side))
    cols, cell_w, cell_h = 6, TILE + SHAPE * ZOOM + 12, TILE + 18
    rows = -(-len(bank) // cols)
    sheet = Image.new("L", (cols * cell_w, rows * cell_h), 255)
    draw = ImageDraw.Draw(sheet)
    for i, name in enumerate(bank.names):
        r, c = divmod(i, cols)
        x, y = c * cell_w, r * cell_h
        thumb = Image.fromarray((bank.images[i][..., 0] * 255).astype(np.uint8)).resize((TILE, TILE))
        sheet.paste(thumb, (x, y))
        sheet.paste(Image.fromarray((shape_view(bank, i) * 255).astype(np.uint8)), (x + TILE + 4, y))
        draw.text((x, y + TILE + 3), name, fill=0)
    sheet.save(HERE / "textures.png")
    frames = [[render_one(MakeConfig(variant="geo+", n=1, look=look), "test", i)["frames"][0]
               for i in range(8)] for look in ("paper", "camouflage")]
    grid = np.concatenate([np.concatenate(row, 1) for row in frames], 0)  # (2 * 64, 8 * 64, 3)
    Image.fromarray(grid).resize((grid.shape[1] * 2, grid.shape[0] * 2), Image.NEAREST).save(
        HERE / "samples.png")


if __name__ == "__main__":
    main()
