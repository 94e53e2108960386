"""What fills the pixels of a Geo/Geo+ sample: backgrounds and shape fills.

The interface, all the renderer needs:

    fill = flat_fill(rgb)                              # Geo: one colour
    fill = draw_texture(bank, rng, cfg, pixels_per_unit)  # Geo+: once per sample per slot
    rgb = fill.colour(canonical_xy)                    # (..., 2) -> (..., 3) float32 in [0, 1]
    fill.source                                        # index for `tex_source`, -1 if flat

    image, index = background(bank, rng, size)         # (H, W, 3) float32, index for `bg_source`
    SampleAppearance(fills, image)                     # the renderer's `Appearance` protocol

`canonical_xy` are coordinates in the shape's own frame in units of its size: a point at
pixel p of a shape with pose (centre c, angle a, size L) has canonical coordinates
R(-a) (p - c) / L (schema's angle convention). Because the texture is a function of these
coordinates only, it moves rigidly with the shape, so the analytic flow is exact for the
texture too; the only error is the bilinear lookup of the texture image.

Texture draw (`TextureConfig`): a random source image; a scale such that one shape size
spans `scale` x the shorter side of the (pre-shrunk) image; a uniform rotation; a crop
centre drawn so that the shape's disc (radius `REACH` size units) lies inside the image
where it fits; and, in the camouflage look only, a multiplicative colour tint of greyscale
sources. The paper's Geo+ puts greyscale Brodatz textures on photographs as they are, so its
look (the default) does not tint; the camouflage look multiplies them by a random saturated
colour (keeping their relative contrast), which with its colour crops of the background
photographs makes a harder, different task (docs/data.md). Colour textures keep their colours.
The renderer reads one colour per pixel, so `pixels_per_unit` (the shape's size in pixels) makes the fill
read the mip level whose pixels match the output grid (anti-aliased, no per-sample resize).

Speed: banks are shrunk and given mip pyramids once per worker (`prepare_backgrounds`,
`prepare_textures`); per sample, the background and every texture lookup is one vectorised
numpy bilinear gather at the right mip level, over the points asked for.

Letters: H = W = output side, h, w = source image side, N = number of lookup points.
"""
from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np

from geogen.sources import ImageBank

# Canonical radius a texture crop keeps inside its image: the triangle's circumradius is
# 1/sqrt(3) ~ 0.577 size units, the square's half-diagonal 0.707; 0.75 adds a little for edge
# pixels (anything farther, e.g. box corners outside the shape, reads the clamped border).
REACH = 0.75


@dataclass(frozen=True)
class BackgroundConfig:
    """Crop side as a fraction of the source's shorter side (uniform), and flip probability."""

    scale: tuple[float, float] = (0.35, 1.0)
    flip_prob: float = 0.5


@dataclass(frozen=True)
class TextureConfig:
    """How a texture is attached to a shape.

    scale: one shape size spans this fraction of the texture image's shorter side (uniform).
    work_side: textures are shrunk once so their shorter side is at most this many pixels
        (memory per worker); 256 keeps full detail for shapes up to ~180 px (images <= 512).
    tint_grey: multiply greyscale textures by a random colour (see module docstring); the
        camouflage look's, off in the paper's (`texture_config`).
    tint_saturation: HSV saturation range of the tint (value 1, hue uniform).
    """

    scale: tuple[float, float] = (0.3, 0.7)
    work_side: int = 256
    tint_grey: bool = False
    tint_saturation: tuple[float, float] = (0.35, 0.8)


def texture_config(look: str) -> TextureConfig:
    """The texture settings of a look (geogen.schema.LOOKS): only camouflage tints."""
    return TextureConfig(tint_grey=look == "camouflage")


def prepare_side(size: int, cfg: BackgroundConfig = BackgroundConfig()) -> int:
    """Shorter side at which a background's smallest crop maps ~1:1 onto `size` pixels."""
    return int(np.ceil(size / cfg.scale[0])) + 2


def prepare_backgrounds(bank: ImageBank, size: int, cfg: BackgroundConfig = BackgroundConfig()
                        ) -> ImageBank:
    """Once per worker: shrink so the smallest crop maps ~1:1 onto `size` pixels, and build
    the mip pyramid that larger crops are read from."""
    return bank.downscaled(prepare_side(size, cfg)).with_pyramid()


def prepare_textures(bank: ImageBank, cfg: TextureConfig = TextureConfig()) -> ImageBank:
    """Once per worker: shrink to `cfg.work_side` and build the mip pyramid."""
    return bank.downscaled(cfg.work_side).with_pyramid()


def mip_level(levels: tuple[np.ndarray, ...], ratio: float) -> int:
    """The pyramid level at which `ratio` level-0 pixels per output pixel become 1 to 2, so a
    bilinear read of it averages what falls in an output pixel (mipmapping)."""
    if ratio <= 1.0:
        return 0
    return min(int(np.floor(np.log2(ratio))), len(levels) - 1)


def _levels(bank: ImageBank, index: int) -> tuple[np.ndarray, ...]:
    if not bank.pyramid:
        raise ValueError(f"image bank {bank.source} has no pyramid: prepare it once per worker "
                         f"(prepare_backgrounds / prepare_textures)")
    return bank.pyramid[index]


def background(bank: ImageBank, rng: np.random.Generator, size: int,
               cfg: BackgroundConfig = BackgroundConfig()) -> tuple[np.ndarray, int]:
    """A random square crop (random scale, position, horizontal flip) of a random image of a
    prepared bank, resampled anti-aliased to (size, size, 3) float32; returns it and the
    image's index."""
    index = int(rng.integers(len(bank)))
    h, w = bank.images[index].shape[:2]
    side = rng.uniform(*cfg.scale) * min(h, w)
    x0 = rng.uniform(0.0, w - side)
    y0 = rng.uniform(0.0, h - side)
    flip = rng.random() < cfg.flip_prob
    return crop_resize(_levels(bank, index), x0, y0, side, size, flip), index


def crop_resize(levels: tuple[np.ndarray, ...], x0: float, y0: float, side: float, size: int,
                flip: bool = False) -> np.ndarray:
    """Resample the square [x0, x0+side)^2 (level-0 pixel-edge coordinates) of a pyramid to
    (size, size, 3) float32: bilinear reads of the mip level that has 1-2 pixels per output
    pixel. `flip` mirrors the result left-right."""
    step = side / size
    k = mip_level(levels, step)
    scale = 1.0 / 2 ** k
    centres = (np.arange(size, dtype=np.float32) + 0.5) * step  # (W,) offsets of pixel centres
    x = (x0 + (centres[::-1] if flip else centres)) * scale  # (W,) level-k coordinates
    y = (y0 + centres) * scale  # (H,)
    # The grid is separable, so bilinear = interpolate rows, then columns (2 small gathers).
    rows = _lerp_axis(levels[k], y, axis=0)  # (H, w, 3)
    return _lerp_axis(rows, x, axis=1)  # (H, W, 3)


def _lerp_axis(image: np.ndarray, coords: np.ndarray, axis: int) -> np.ndarray:
    """Linear interpolation of `image` along `axis` at edge-convention `coords` (clamped)."""
    n = image.shape[axis]
    u = np.clip(coords.astype(np.float32) - 0.5, 0.0, n - 1.0)  # centre-indexed
    i0 = np.minimum(u.astype(np.int32), max(n - 2, 0))
    f = u - i0.astype(np.float32)
    f = f[:, None, None] if axis == 0 else f[None, :, None]
    a = image.take(i0, axis=axis)
    b = image.take(np.minimum(i0 + 1, n - 1), axis=axis)
    return a + (b - a) * f


@dataclass(frozen=True)
class FlatFill:
    """Geo's fill: one colour everywhere on the shape."""

    rgb: tuple[float, float, float]
    source: int = -1

    def colour(self, canonical_xy: np.ndarray) -> np.ndarray:
        """(..., 2) -> (..., 3) float32, constant."""
        return np.broadcast_to(np.asarray(self.rgb, np.float32),
                               canonical_xy.shape[:-1] + (3,)).copy()


def flat_fill(rgb) -> FlatFill:
    return FlatFill(tuple(float(c) for c in rgb))


@dataclass(frozen=True, eq=False)
class TextureFill:
    """A texture image attached to a shape's canonical frame.

    Texture pixel coordinates (edge convention: pixel (i, j) spans [j, j+1) x [i, i+1))
    of a canonical point q are `centre + span * R(angle) q`.
    """

    image: np.ndarray  # (h, w, 3) float32, the prepared source image
    centre: tuple[float, float]  # (x, y) in texture pixels
    span: float  # texture pixels per shape size
    angle: float  # radians
    tint: tuple[float, float, float]  # (1, 1, 1) when untinted
    source: int

    def colour(self, canonical_xy: np.ndarray) -> np.ndarray:
        """(..., 2) canonical points -> (..., 3) float32 RGB by bilinear lookup."""
        c, s = np.cos(self.angle) * self.span, np.sin(self.angle) * self.span
        qx, qy = canonical_xy[..., 0], canonical_xy[..., 1]
        tx = c * qx - s * qy + self.centre[0]  # (...)
        ty = s * qx + c * qy + self.centre[1]  # (...)
        rgb = bilinear(self.image, tx, ty)  # (..., 3)
        if self.tint != (1.0, 1.0, 1.0):
            rgb *= np.asarray(self.tint, np.float32)
        return rgb


def bilinear(image: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear lookup of (h, w, 3) `image` at edge-convention coordinates (x, y) (any equal
    shapes); points beyond the border take the border's value. Returns (..., 3) float32."""
    h, w = image.shape[:2]
    shape = np.shape(x)
    # Pixel (i, j) has its centre at (j + 0.5, i + 0.5): shift to centre-indexed coordinates.
    u = np.clip(np.asarray(x, np.float32).reshape(-1) - 0.5, 0.0, w - 1.0)  # (N,)
    v = np.clip(np.asarray(y, np.float32).reshape(-1) - 0.5, 0.0, h - 1.0)  # (N,)
    j0 = np.minimum(u.astype(np.int32), max(w - 2, 0))  # (N,) left neighbour column
    i0 = np.minimum(v.astype(np.int32), max(h - 2, 0))  # (N,) upper neighbour row
    fu = (u - j0.astype(np.float32))[:, None]  # (N, 1); float32 keeps the arithmetic single
    fv = (v - i0.astype(np.float32))[:, None]  # (N, 1)
    dj, di = min(w - 1, 1), (w if h > 1 else 0)  # a 1-pixel-wide/high image has no neighbour
    flat = image.reshape(-1, 3)  # (h * w, 3)
    base = i0 * w + j0  # (N,)
    a, b = flat.take(base, axis=0), flat.take(base + dj, axis=0)  # (N, 3)
    c, d = flat.take(base + di, axis=0), flat.take(base + di + dj, axis=0)  # (N, 3)
    top = a + (b - a) * fu  # (N, 3)
    bottom = c + (d - c) * fu  # (N, 3)
    return (top + (bottom - top) * fv).reshape(shape + (3,))


def draw_texture(bank: ImageBank, rng: np.random.Generator,
                 cfg: TextureConfig = TextureConfig(),
                 pixels_per_unit: float | None = None) -> TextureFill:
    """Draw one slot's texture: source, scale, rotation, crop centre, tint (always drawing the
    tint's numbers, so the stream does not depend on which image was picked).

    Args:
        pixels_per_unit: the shape's size in output pixels (the smallest over the clip when
            it changes). The renderer reads one colour per pixel, so a texture finer than
            the pixel grid would alias; given this, the fill reads the mip level (of a
            prepared bank) with 1-2 texture pixels per output pixel.
    """
    index = int(rng.integers(len(bank)))
    image = bank.images[index]  # (h, w, 3)
    h, w = image.shape[:2]
    span = rng.uniform(*cfg.scale) * min(h, w)
    angle = rng.uniform(0.0, 2.0 * np.pi)
    reach = REACH * span
    ux, uy = rng.random(2)
    # The centre ranges over the positions that keep the shape's disc inside the image; an
    # image too small for that puts it in the middle (the lookup clamps at the border).
    cx = reach + ux * (w - 2 * reach) if w > 2 * reach else w / 2
    cy = reach + uy * (h - 2 * reach) if h > 2 * reach else h / 2
    hue, sat = rng.random(), rng.uniform(*cfg.tint_saturation)
    tint = (1.0, 1.0, 1.0)
    if cfg.tint_grey and bank.grey[index]:
        tint = tuple(float(t) for t in colorsys.hsv_to_rgb(hue, sat, 1.0))
    if pixels_per_unit is not None:
        levels = _levels(bank, index)
        k = mip_level(levels, span / pixels_per_unit)
        image, cx, cy, span = levels[k], cx / 2 ** k, cy / 2 ** k, span / 2 ** k
    return TextureFill(image, (float(cx), float(cy)), float(span), float(angle), tint, index)


@dataclass(frozen=True, eq=False)
class SampleAppearance:
    """One sample's fills and background, in the renderer's `Appearance` protocol
    (`geogen.render`): fill(slot, uv) -> RGB and background(xy) -> RGB."""

    fills: tuple  # (S,) of FlatFill | TextureFill
    image: np.ndarray  # (H, W, 3) float32, the static background

    def fill(self, slot: int, uv: np.ndarray) -> np.ndarray:
        return self.fills[slot].colour(uv)  # (..., 3)

    def background(self, xy: np.ndarray) -> np.ndarray:
        """The background image at pixel centres; `xy` must be the full (H, W, 2) grid."""
        if xy.shape[:-1] != self.image.shape[:2]:
            raise ValueError(f"background asked at {xy.shape[:-1]}, image is {self.image.shape[:2]}")
        return self.image  # (H, W, 3)
