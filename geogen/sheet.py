"""Contact sheet: one row per sample with its frames, flow as a colour wheel, visible labels and
amodal masks (frame 0), so a folder can be inspected by eye.

Rows run down in blocks of at most MAX_SIDE pixels, the blocks side by side, each under a band
of column titles (Pillow's default font, as `flowbench show` draws); the flow's key
(geogen.flowviz) stands alone in the last column. The image type follows the extension of
the output (Pillow's formats: .png, .jpg, ...).

Letters: N samples, T frames, S slots, H = W = image side.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from geogen import schema
from geogen.dataset import GeoDataset, open_split
from geogen.errors import GeogenError
from geogen.flowviz import flow_key, flow_to_rgb, max_length

# Label colours for `visible`: background grey, then slot 0, 1, ... (Geo: red circle, green
# square, blue triangle; an articulated figure's ten parts take the next seven as well).
PALETTE = np.array([[40, 40, 40], [230, 80, 60], [70, 170, 80], [60, 110, 230],
                    [240, 200, 40], [170, 70, 200], [60, 200, 210], [250, 140, 30],
                    [150, 100, 60], [240, 130, 190], [200, 200, 200]], np.uint8)
GAP = 2
BACKDROP = 150  # grey between the tiles: still flow is white and must not merge into the sheet
BLOCK_GAP = 12  # between blocks of rows, so a block's rows read as one column
MIN_TILE = 96   # small images are enlarged (nearest neighbour) to at least this side
MAX_SIDE = 4096     # a sheet is never taller than this; rows go on in a block to the right
MAX_WIDTH = 16384   # nor wider: more samples than fit are refused
TITLE_H = 16        # the band of column titles above the rows
TITLE_BG = 235      # light, so the black titles read; the tiles keep BACKDROP around them
FONT_PX = 12        # "amodal triangle" is 89 px wide at this size, inside the smallest tile


@dataclass(frozen=True)
class Sheet:
    """What `contact_sheet` wrote: the file, the flow length that saturates the colours, and
    how many blocks of rows it holds."""
    path: Path
    max_flow: float
    blocks: int
    slots: tuple[str, ...] = schema.SLOTS


def image_format(out: str | Path) -> str:
    """Pillow's format for the extension of `out`, or a GeogenError naming the usable ones."""
    ext = Path(out).suffix.lower()
    known = Image.registered_extensions()
    if known.get(ext) not in Image.SAVE:
        raise GeogenError(f"{out}: unknown image type {ext or '(no extension)'!r}; "
                          f"use .png or .jpg")
    return known[ext]


def sample_tiles(item: dict[str, np.ndarray], max_mag: float) -> list[np.ndarray]:
    """The tiles (H, W, 3) uint8 of one sample, left to right."""
    tiles = list(item["frames"])                                        # T x (H, W, 3)
    tiles += [flow_to_rgb(f, max_mag) for f in item["flow"]]            # (T-1) x
    tiles += [PALETTE[v] for v in item["visible"]]                      # T x
    tiles += [np.repeat(m[..., None].astype(np.uint8) * 255, 3, -1)
              for m in item["amodal"][0]]                               # S x
    return tiles


def column_titles(frames: int, slots: tuple[str, ...] = schema.SLOTS) -> list[str]:
    """The title of each tile of a row, left to right (as `sample_tiles` lays them out)."""
    return ([f"frame {t}" for t in range(frames)]
            + [f"flow {t}->{t + 1}" for t in range(frames - 1)]
            + [f"visible {t}" for t in range(frames)]
            + [f"amodal {short_name(slot)}" for slot in slots])


def short_name(slot: str) -> str:
    """A slot's name short enough for a tile's title: left_upper_arm -> L up arm."""
    for long, short in (("left_", "L "), ("right_", "R "), ("upper_", "up "),
                        ("lower_", "low ")):
        slot = slot.replace(long, short)
    return slot.replace("_", " ")


def _rows_per_block(tile: int) -> int:
    return max(1, (MAX_SIDE - TITLE_H - GAP) // (tile + GAP))


def layout(n: int, cols: int, tile: int) -> tuple[int, int, int, int]:
    """(rows per block, blocks, sheet height, sheet width) for n rows of `cols` tiles and the
    key's column, under the titles' band."""
    per_block = _rows_per_block(tile)
    blocks = -(-n // per_block)
    block_w = cols * (tile + GAP) + GAP
    return (per_block, blocks, TITLE_H + min(n, per_block) * (tile + GAP) + GAP,
            blocks * (block_w + BLOCK_GAP) + tile + GAP)


def _draw_titles(sheet: Image.Image, titles: list[str], blocks: int, tile: int) -> None:
    """Each block's column titles, and the key's, centred over their tiles in the top band."""
    draw = ImageDraw.Draw(sheet)
    draw.rectangle((0, 0, sheet.width - 1, TITLE_H - 1), fill=(TITLE_BG,) * 3)
    font = ImageFont.load_default(size=FONT_PX)
    block_w = len(titles) * (tile + GAP) + GAP + BLOCK_GAP
    lefts = [(b * block_w + GAP + c * (tile + GAP), title)
             for b in range(blocks) for c, title in enumerate(titles)]
    lefts.append((sheet.width - GAP - tile, "flow key"))
    for x, title in lefts:
        x += max(0, (tile - draw.textlength(title, font=font)) // 2)
        draw.text((x, TITLE_H // 2), title, fill=(0, 0, 0), font=font, anchor="lm")


def max_samples(cols: int, tile: int) -> int:
    """How many rows of `cols` tiles a sheet of at most MAX_SIDE x MAX_WIDTH pixels holds."""
    per_block = _rows_per_block(tile)
    block_w = cols * (tile + GAP) + GAP
    return per_block * max(1, (MAX_WIDTH - tile - GAP) // (block_w + BLOCK_GAP))


def contact_sheet(root: str | Path, split: str, indices: Sequence[int], out: str | Path) -> Sheet:
    """Write a contact sheet of samples `indices` of `split` (see the module); returns it."""
    fmt = image_format(out)
    open_split(root, split).check()  # the whole split, as `info` does, not only the rows drawn
    ds = GeoDataset(root, split, ("frames", "flow", "visible", "amodal"))
    slots = ds._split.slots
    if len(slots) >= len(PALETTE):
        raise GeogenError(f"{root}: {len(slots)} slots, more than the sheet has colours for "
                          f"({len(PALETTE) - 1})")
    bad = [i for i in indices if not 0 <= i < len(ds)]
    if bad:
        raise GeogenError(f"index {bad[0]} out of range: {split} has {len(ds)} samples")
    scale = max(1, int(np.ceil(MIN_TILE / ds.size)))
    tile = ds.size * scale
    cols = len(column_titles(ds.frames, slots))  # frames, flows, visible labels, amodal masks
    cap = max_samples(cols, tile)
    if len(indices) > cap:
        raise GeogenError(f"--index names {len(indices)} samples; a sheet of {ds.size} px "
                          f"images holds at most {cap} ({MAX_SIDE} px tall, {MAX_WIDTH} px "
                          f"wide): split the range")
    items = [{k: v.numpy() for k, v in ds[i].items()} for i in indices]
    max_mag = max_length([it["flow"] for it in items])
    per_block, blocks, height, width = layout(len(items), cols, tile)
    sheet = np.full((height, width, 3), BACKDROP, np.uint8)
    block_w = cols * (tile + GAP) + GAP + BLOCK_GAP
    for r, item in enumerate(items):
        x0, y = (r // per_block) * block_w, TITLE_H + GAP + (r % per_block) * (tile + GAP)
        for c, img in enumerate(sample_tiles(item, max_mag)):
            x = x0 + GAP + c * (tile + GAP)
            sheet[y:y + tile, x:x + tile] = img.repeat(scale, 0).repeat(scale, 1)
    top = TITLE_H + GAP
    sheet[top:top + tile, width - GAP - tile:width - GAP] = flow_key(tile)
    image = Image.fromarray(sheet)
    _draw_titles(image, column_titles(ds.frames, slots), blocks, tile)
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        image.save(tmp, format=fmt)
        os.replace(tmp, out)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise GeogenError(f"{out}: cannot write the sheet ({err.strerror or err})") from None
        raise
    return Sheet(out, max_mag, blocks, slots)


def legend(max_flow: float, slots: tuple[str, ...] = schema.SLOTS) -> str:
    """What each column of a row shows (for the CLI)."""
    names = ("red circle, green square, blue triangle" if slots == schema.SLOTS
             else "one colour per part in slot order")
    return ("columns: frames | forward flow (white = still, hue = direction, saturation = "
            f"length up to {max_flow:.1f} px; key in the last column) | visible (grey "
            f"background, {names}) | amodal masks at frame 0 (" + ", ".join(slots) + ")")
