"""Procedural greyscale textures in the Brodatz style: the default Geo+ texture bank's extra
sources beside scikit-image's brick, grass and gravel (geogen.sources).

The paper fills Geo+'s shapes with Brodatz textures: greyscale photographs of one stationary
material each (cloth, wood, stone, bark, ...). The album's licence does not let us bundle it, so
the default bank adds generators of such materials. Each is a small named function of its own
`numpy.random.Generator` (seeded from a fixed number per texture, so the bank is the same on
every machine and run) that returns a (SIDE, SIDE) float array; `texture_bank` rescales each to
its own mean and contrast (`Texture.mean`, `Texture.std`), spread over the bank so that two grey
shapes side by side differ in brightness and contrast as well as in pattern.

Scale: a shape of size L spans 0.3-0.7 of a texture's side (geogen.appearance.TextureConfig), so
a 10-30 px shape reads one output pixel per 5-15 texture pixels at SIDE = 256 (the mip level a
shape reads, appearance.mip_level). Every generator's structure is therefore 8-60 texture pixels
across: finer detail averages away to flat grey in a 64 px image.

Letters: SIDE the texture's side in pixels.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

SIDE = 256  # = TextureConfig.work_side: made at the size the renderer reads, never shrunk


@dataclass(frozen=True)
class Texture:
    """A named generator and the grey level statistics its output is rescaled to."""

    name: str
    make: Callable[[np.random.Generator, int], np.ndarray]  # (rng, SIDE) -> (SIDE, SIDE)
    seed: int
    mean: float  # in [0, 1]
    std: float   # of the grey levels, before clipping to [0, 1]


REGISTRY: dict[str, Texture] = {}


def texture(name: str, seed: int, mean: float, std: float):
    """Register a generator under `name` (the manifest's and the contact sheet's name)."""
    def wrap(fn):
        if name in REGISTRY:
            raise ValueError(f"texture {name!r} registered twice")
        REGISTRY[name] = Texture(name, fn, seed, mean, std)
        return fn
    return wrap


# ---------------------------------------------------------------------------- building blocks

def _grid(side: int, step: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) coordinates of the centres of `step` x `step` pixel blocks, each
    (SIDE / step, SIDE / step)."""
    c = (np.arange(side // step, dtype=np.float64) + 0.5) * step
    return np.meshgrid(c, c)


@functools.lru_cache(maxsize=2)
def _frequencies(side: int) -> tuple[np.ndarray, np.ndarray]:
    """(|f| in cycles per image, (fx, fy) in cycles per pixel) of the rfft2 grid, each
    (SIDE, SIDE // 2 + 1): shared by every noise of the bank."""
    fy = np.fft.fftfreq(side)[:, None]
    fx = np.fft.rfftfreq(side)[None, :]
    return np.hypot(fx, fy) * side, np.broadcast_arrays(fx, fy)


def _shaped_noise(rng: np.random.Generator, side: int, amp: np.ndarray) -> np.ndarray:
    """White noise filtered by the rfft2-grid transfer function `amp`; zero mean, unit std."""
    spec = (rng.standard_normal(amp.shape, np.float32)
            + 1j * rng.standard_normal(amp.shape, np.float32)) * amp
    out = np.fft.irfft2(spec, s=(side, side))
    return (out - out.mean()) / (out.std() + 1e-12)


def spectral_noise(rng: np.random.Generator, side: int, beta: float,
                   band: tuple[float, float] = (2.0, 64.0)) -> np.ndarray:
    """Gaussian noise with power spectrum 1 / f^beta between `band` cycles per image (so its
    features are between side/band[1] and side/band[0] pixels across); zero mean, unit std."""
    f, _ = _frequencies(side)
    amp = np.where((f >= band[0]) & (f <= band[1]), np.maximum(f, 1.0) ** (-beta / 2), 0.0)
    return _shaped_noise(rng, side, amp)


def _gaussian(side: int, sigma: tuple[float, float], angle: float = 0.0) -> np.ndarray:
    """Transfer function exp(-2 pi^2 sigma^2 f^2) of a Gaussian blur of `sigma` = (rows,
    columns) pixels turned by `angle` degrees, on the rfft2 grid (a blur of any size costs one
    FFT, and it wraps)."""
    _, (fx, fy) = _frequencies(side)
    a = np.deg2rad(angle)
    u, v = fx * np.cos(a) + fy * np.sin(a), -fx * np.sin(a) + fy * np.cos(a)
    return np.exp(-2.0 * np.pi ** 2 * ((sigma[0] * v) ** 2 + (sigma[1] * u) ** 2))


def streaks(rng: np.random.Generator, side: int, sigma: tuple[float, float],
            angle: float = 0.0) -> np.ndarray:
    """White noise blurred by a Gaussian (`_gaussian`); zero mean, unit std."""
    return _shaped_noise(rng, side, _gaussian(side, sigma, angle))


def _double(a: np.ndarray) -> np.ndarray:
    """(n, n, ...) -> (2n, 2n, ...) by linear interpolation between block centres (each new
    pixel 3/4 of its own block and 1/4 of the next one along each axis; the border clamped)."""
    for axis in (0, 1):
        prev = np.concatenate([a.take([0], axis), a.take(np.arange(a.shape[axis] - 1), axis)],
                              axis)
        nxt = np.concatenate([a.take(np.arange(1, a.shape[axis]), axis), a.take([-1], axis)],
                             axis)
        a = np.stack([0.75 * a + 0.25 * prev, 0.75 * a + 0.25 * nxt], axis + 1)
        a = a.reshape(a.shape[:axis] + (-1,) + a.shape[axis + 2:])
    return a


def _nearest_two(points: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """Distances to the nearest and second nearest of `points` (P, 2), (SIDE, SIDE, 2), and
    the index of the nearest, (SIDE, SIDE). Found on 2 x 2 pixel blocks and enlarged (a quarter
    of the queries; the cells are 10-40 px across)."""
    x, y = _grid(side, 2)
    dist, idx = cKDTree(points).query(np.stack([x.ravel(), y.ravel()], 1), k=2)
    half = side // 2
    nearest = idx[:, 0].reshape(half, half).repeat(2, 0).repeat(2, 1)
    return _double(dist.reshape(half, half, 2)), nearest


def _cells(rng: np.random.Generator, side: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Worley's cellular basis of `count` random points (`_nearest_two`)."""
    return _nearest_two(rng.uniform(0, side, (count, 2)), side)


def _warp(image: np.ndarray, rng: np.random.Generator, amount: float, beta: float = 3.0
          ) -> np.ndarray:
    """`image` displaced by smooth noise of `amount` pixels (wobbly hand-made regularity)."""
    side = image.shape[0]
    x, y = _grid(side)
    dx = spectral_noise(rng, side, beta, (1.0, 12.0)) * amount
    dy = spectral_noise(rng, side, beta, (1.0, 12.0)) * amount
    return ndimage.map_coordinates(image, [y + dy - 0.5, x + dx - 0.5], order=1, mode="wrap")


# ---------------------------------------------------------------------------- the textures
# Means and contrasts are set by hand to cover 0.25-0.75 and 0.08-0.25 evenly, so that the
# bank is not a set of textures of one grey.

@texture("fractal_rough", 101, 0.45, 0.20)
def _fractal_rough(rng, side):
    return spectral_noise(rng, side, 1.0, (4.0, 24.0))


@texture("fractal_cloudy", 102, 0.62, 0.17)
def _fractal_cloudy(rng, side):
    return spectral_noise(rng, side, 2.0, (3.0, 32.0))


@texture("fractal_billowy", 103, 0.38, 0.15)
def _fractal_billowy(rng, side):
    return np.abs(spectral_noise(rng, side, 2.0, (3.0, 24.0)))  # folded: soft dark creases


@texture("fractal_ridged", 104, 0.55, 0.22)
def _fractal_ridged(rng, side):
    return -np.abs(spectral_noise(rng, side, 1.5, (3.0, 24.0)))  # sharp bright ridges


@texture("woven_canvas", 105, 0.58, 0.14)
def _woven_canvas(rng, side):
    x, y = _grid(side)
    period = 28.0  # one thread crossing, in pixels
    over = (np.floor(x / period) + np.floor(y / period)) % 2  # which thread lies on top
    warp = np.sin(np.pi * (x % period) / period) * np.cos(2 * np.pi * y / period) ** 2
    weft = np.sin(np.pi * (y % period) / period) * np.cos(2 * np.pi * x / period) ** 2
    return _warp(np.where(over > 0, warp, weft), rng, 1.5) + 0.15 * spectral_noise(rng, side, 1.0)


@texture("basket_weave", 106, 0.42, 0.21)
def _basket_weave(rng, side):
    x, y = _grid(side)
    block = 42.0
    horizontal = (np.floor(x / block) + np.floor(y / block)) % 2 == 0
    strands = np.where(horizontal, np.sin(2 * np.pi * y / (block / 3)),
                       np.sin(2 * np.pi * x / (block / 3)))
    # Light falls differently on the two directions of strand, so the blocks differ in tone too
    # (what a shape of a few pixels still shows when the strands are too fine for it).
    return _warp(np.abs(strands) + 0.6 * horizontal, rng, 1.0)


@texture("wood_grain", 107, 0.50, 0.13)
def _wood_grain(rng, side):
    x, y = _grid(side)
    cx, cy = rng.uniform(-3 * side, -side), rng.uniform(0, side)  # the trunk's axis, far off
    r = np.hypot((x - cx) * 0.15, y - cy) + 6.0 * spectral_noise(rng, side, 3.0, (1.0, 8.0))
    rings = (r / 14.0) % 1.0  # one ring per 14 px: late wood dark, early wood light
    return rings ** 3 + 0.2 * spectral_noise(rng, side, 1.0, (8.0, 64.0))


@texture("cobblestones", 108, 0.47, 0.19)
def _cobblestones(rng, side):
    dist, idx = _cells(rng, side, 120)
    edge = dist[..., 1] - dist[..., 0]  # 0 on the joints between stones
    shade = rng.uniform(-1, 1, 120)[idx]  # each stone its own tone
    return np.minimum(edge / 6.0, 1.0) * (1.5 + 0.6 * shade)


@texture("cellular_bumps", 109, 0.66, 0.12)
def _cellular_bumps(rng, side):
    dist, _ = _cells(rng, side, 200)
    return -dist[..., 0]


@texture("dried_mud", 110, 0.56, 0.18)
def _dried_mud(rng, side):
    dist, _ = _cells(rng, side, 60)
    cracks = np.exp(-((dist[..., 1] - dist[..., 0]) / 3.5) ** 2)  # thin dark lines
    return -cracks + 0.3 * spectral_noise(rng, side, 1.5, (4.0, 48.0))


@texture("crackle_glaze", 111, 0.70, 0.10)
def _crackle_glaze(rng, side):
    fine, _ = _cells(rng, side, 150)
    return -np.exp(-((fine[..., 1] - fine[..., 0]) / 3.0) ** 2)


@texture("dots_regular", 112, 0.40, 0.24)
def _dots_regular(rng, side):
    x, y = _grid(side)
    period = 24.0
    d = np.hypot((x % period) - period / 2, (y % period) - period / 2)
    return _warp((d < period * 0.3).astype(float), rng, 0.8)


@texture("dots_random", 113, 0.60, 0.20)
def _dots_random(rng, side):
    dist, idx = _cells(rng, side, 150)
    radius = rng.uniform(3.0, 8.0, 150)[idx]
    return (dist[..., 0] < radius).astype(float)


@texture("brushed_metal", 114, 0.64, 0.09)
def _brushed_metal(rng, side):
    return streaks(rng, side, (1.2, 40.0)) + 0.7 * spectral_noise(rng, side, 2.5, (2.0, 12.0))


@texture("bark", 115, 0.35, 0.18)
def _bark(rng, side):
    ridges = np.abs(streaks(rng, side, (30.0, 3.0)))  # deep vertical furrows at the zero crossings
    return _warp(ridges, rng, 4.0) + 0.3 * spectral_noise(rng, side, 1.5, (6.0, 48.0))


def _turing(rng: np.random.Generator, side: int, scale: float, bias: float, steps: int
            ) -> np.ndarray:
    """Reaction-diffusion-like pattern: repeated difference of Gaussians (short-range activation,
    long-range inhibition) and a saturating nonlinearity settle into spots or stripes of one
    wavelength (about 4 * scale px); `bias` picks spots (far from 0) or labyrinths (near 0)."""
    dog = _gaussian(side, (scale, scale)) - _gaussian(side, (2.0 * scale, 2.0 * scale))
    u = rng.standard_normal((side, side))
    for _ in range(steps):
        diff = np.fft.irfft2(np.fft.rfft2(u) * dog, s=(side, side))  # activation - inhibition
        u = np.tanh(4.0 * diff / (diff.std() + 1e-12) + bias)
    return u


@texture("turing_spots", 116, 0.52, 0.23)
def _turing_spots(rng, side):
    return _turing(rng, side, 2.5, 1.2, 6)


@texture("turing_labyrinth", 117, 0.44, 0.16)
def _turing_labyrinth(rng, side):
    return _turing(rng, side, 2.5, 0.0, 6)


@texture("wavy_stripes", 118, 0.57, 0.21)
def _wavy_stripes(rng, side):
    x, y = _grid(side)
    return np.sin(2 * np.pi * (x + 8.0 * spectral_noise(rng, side, 3.0, (1.0, 6.0))) / 26.0)


@texture("warped_checks", 119, 0.49, 0.24)
def _warped_checks(rng, side):
    x, y = _grid(side)
    return _warp(((np.floor(x / 28) + np.floor(y / 28)) % 2).astype(float), rng, 4.0)


@texture("herringbone", 120, 0.37, 0.13)
def _herringbone(rng, side):
    x, y = _grid(side)
    column = np.floor(x / 36.0)
    slant = np.where(column % 2 == 0, 1.0, -1.0)  # alternate columns lean opposite ways
    bricks = ((y + slant * (x % 36.0)) % 16.0) < 11.0
    return _warp(bricks.astype(float), rng, 0.8) + 0.3 * spectral_noise(rng, side, 1.5, (8.0, 64.0))


@texture("ripples", 121, 0.61, 0.15)
def _ripples(rng, side):
    x, y = _grid(side)
    out = np.zeros((side, side))
    for cx, cy in rng.uniform(0, side, (4, 2)):  # interference of four drops
        out += np.cos(2 * np.pi * np.hypot(x - cx, y - cy) / rng.uniform(20.0, 30.0))
    return out


@texture("marble", 122, 0.68, 0.14)
def _marble(rng, side):
    x, y = _grid(side)
    turbulence = spectral_noise(rng, side, 2.0, (1.0, 16.0))
    return np.sin(2 * np.pi * (x + y) / 90.0 + 4.0 * turbulence) ** 3  # veined bands


@texture("fish_scales", 123, 0.46, 0.17)
def _fish_scales(rng, side):
    x, y = _grid(side)
    r = 18.0
    row = np.floor(y / r)
    shifted = x + (row % 2) * r  # every other row offset by half a scale
    d = np.hypot(shifted % (2 * r) - r, y % r)  # distance to the scale's lower centre
    return _warp(d / r, rng, 1.0)


@texture("honeycomb", 124, 0.53, 0.20)
def _honeycomb(rng, side):
    h = 22.0
    pts = [(i * h * np.sqrt(3) + (j % 2) * h * np.sqrt(3) / 2, j * 1.5 * h)
           for j in range(-1, int(side / (1.5 * h)) + 2)
           for i in range(-1, int(side / (h * np.sqrt(3))) + 2)]
    dist, _ = _nearest_two(np.array(pts), side)
    edge = dist[..., 1] - dist[..., 0]
    return _warp(np.minimum(edge / 4.0, 1.0), rng, 0.8)


@texture("grid_lines", 125, 0.72, 0.11)
def _grid_lines(rng, side):
    x, y = _grid(side)
    lines = np.maximum(np.abs((x % 36.0) - 18.0), np.abs((y % 36.0) - 18.0)) > 14.0
    return -_warp(lines.astype(float), rng, 1.5) + 0.15 * spectral_noise(rng, side, 1.5, (6, 48))


@texture("chevron_knit", 126, 0.41, 0.19)
def _chevron_knit(rng, side):
    x, y = _grid(side)
    v = np.abs((x % 28.0) - 14.0)  # a V per 28 px column
    return _warp(np.sin(2 * np.pi * (y + v) / 20.0), rng, 1.0)


@texture("pebbles", 127, 0.33, 0.20)
def _pebbles(rng, side):
    dist, idx = _cells(rng, side, 90)
    size = rng.uniform(0.6, 1.0, 90)[idx]
    dome = np.sqrt(np.clip(1.0 - dist[..., 0] / (dist[..., 1] + 1e-9), 0.0, 1.0))
    return dome * size


@texture("straw", 128, 0.59, 0.16)
def _straw(rng, side):
    # three layers of fibres at random angles
    return sum(np.abs(streaks(rng, side, (1.0, 25.0), angle)) for angle in rng.uniform(0, 180, 3))


@texture("leather", 129, 0.31, 0.12)
def _leather(rng, side):
    dist, _ = _cells(rng, side, 400)
    grain = np.minimum((dist[..., 1] - dist[..., 0]) / 3.0, 1.0)
    return grain + 0.6 * spectral_noise(rng, side, 2.0, (2.0, 16.0))


@texture("corrugated", 130, 0.54, 0.25)
def _corrugated(rng, side):
    x, y = _grid(side)
    return np.abs(np.sin(np.pi * _warp(y, rng, 2.0) / 20.0)) ** 3


@texture("terrazzo", 131, 0.63, 0.22)
def _terrazzo(rng, side):
    dist, idx = _cells(rng, side, 180)
    chips = rng.uniform(-1, 1, 180)[idx] * (dist[..., 1] - dist[..., 0] > 3.0)
    return chips + 0.3 * spectral_noise(rng, side, 1.0, (8.0, 64.0))


@texture("tartan", 132, 0.45, 0.14)
def _tartan(rng, side):
    x, y = _grid(side)
    widths = rng.uniform(8.0, 20.0, 4)
    period = 2 * widths.sum()
    bands = np.cumsum(np.concatenate([widths, widths[::-1]]))
    sx = np.searchsorted(bands, x % period) % 3  # 0, 1, 2: three thread tones
    sy = np.searchsorted(bands, y % period) % 3
    return sx + sy + 0.8 * np.sin(np.pi * (x + y) / 12.0) ** 2  # the twill's diagonal


@texture("rosettes", 133, 0.57, 0.18)
def _rosettes(rng, side):
    n = spectral_noise(rng, side, 2.0, (6.0, 20.0))
    return -np.exp(-((n - 0.9) / 0.25) ** 2)  # dark rings around bright blobs (a leopard's)


@texture("contours", 134, 0.66, 0.17)
def _contours(rng, side):
    n = spectral_noise(rng, side, 3.0, (1.0, 10.0))
    return -np.exp(-(((n * 4.0) % 1.0 - 0.5) / 0.2) ** 2)  # level lines of a smooth relief


def _rescale(image: np.ndarray, mean: float, std: float) -> np.ndarray:
    """`image` with the given mean and std of its grey levels, clipped to [0, 1], float32."""
    z = (image - image.mean()) / (image.std() + 1e-12)
    return np.clip(mean + std * z, 0.0, 1.0).astype(np.float32)


def make_texture(name: str, side: int = SIDE) -> np.ndarray:
    """One registered texture, (side, side) float32 in [0, 1]; the same on every call."""
    t = REGISTRY[name]
    return _rescale(t.make(np.random.default_rng(t.seed), side), t.mean, t.std)


@functools.lru_cache(maxsize=1)
def texture_bank() -> tuple[tuple[str, np.ndarray], ...]:
    """Every registered texture by name, in registration order; made once per process (all
    of them take well under a second)."""
    return tuple((name, make_texture(name)) for name in REGISTRY)
