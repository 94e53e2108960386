"""Image sources for Geo+ backgrounds and textures.

An `ImageBank` is an ordered, named list of RGB images (float32 in [0, 1], shape (h, w, 3)),
each with a `grey` flag (True when the source had one channel, or three equal ones; such
images are stored expanded to three equal channels). A sample records the integer index of
the image it drew (`bg_source`, `tex_source` in geogen.schema), and `describe()` gives the
manifest entry that turns those indices back into names.

Two kinds of bank:
- `ImageBank.from_folder(DIR)`: every JPEG, PNG, TIFF and GIF under DIR (recursive), in
  sorted order of relative path, so indices are stable across machines and runs. A folder
  with no image, or files that do not decode or are smaller than `smallest` (a background
  smaller than one sample would be enlarged into a blur: refused, not scaled), raise
  `GeogenError` naming them; `skip_bad=True` leaves them out instead and the bank names them.
- `default_backgrounds()` / `default_textures()`: images bundled inside installed packages
  (scikit-image's `skimage.data`, scikit-learn's sample images); never a network call.

Which bundled images are used (scikit-image 0.26, checked with sockets disabled):
- Load offline and used as backgrounds (photographs): astronaut, camera, chelsea, coffee,
  coins, hubble_deep_field, immunohistochemistry, moon, retina (central square, without the
  black surround of the fundus), rocket, stereo_motorcycle (left view); sklearn's china and
  flower. Load offline but not used: cat (the same photo as chelsea), clock and cell (nearly
  flat grey), and the synthetic images (binary_blobs, checkerboard, colorwheel, horse, logo,
  page, text, shepp_logan_phantom, microaneurysms).
- Need the optional `pooch` download and fail offline, so never used: brain, cells3d, eagle,
  human_mitosis, kidney, lily, nickel_solidification, palisades_of_vogt, protein_transport,
  skin, vortex.
- Textures, by look (geogen.schema.LOOKS):
  - "paper" (the default, the paper's Brodatz album in kind): brick, grass, gravel (whole
    greyscale texture photographs) plus the procedural greyscale textures of
    geogen.textures; none is taken from a background photograph.
  - "camouflage" (the former default): brick, grass, gravel plus crops of the bundled
    photos chosen because every part of the crop is the same stationary material: the cat's
    forehead fur (chelsea), the dahlia's petals (flower), the stained tissue
    (immunohistochemistry, whole image), the lawn beside the tripod (camera), the tree
    foliage (china). These are crops of background photographs, so a shape can wear the
    material of the photo behind it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from geogen.errors import GeogenError
from geogen.schema import DEFAULT_LOOK, LOOKS

IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".gif")
_GREY_MODES = ("1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "I;16N", "F")

Crop = tuple[int, int, int, int]  # (row0, row1, col0, col1) of the source array
NAMED = 3  # unusable files named in an error beside the first one


class UnusableImage(GeogenError):
    """An image file that does not decode, or is too small to be used."""


@dataclass(frozen=True, eq=False)
class ImageBank:
    """Named RGB images in [0, 1]; `source` is the folder path or the default's name."""

    source: str
    names: tuple[str, ...]
    images: tuple[np.ndarray, ...]  # each (h, w, 3) float32
    grey: tuple[bool, ...]
    total_found: int = 0  # files found before `limit` picked a subset (0: same as count)
    # Per image, successive 2x2-box halvings (level 0 = the image); empty until `with_pyramid`.
    pyramid: tuple[tuple[np.ndarray, ...], ...] = ()
    skipped: tuple[str, ...] = ()  # files left out as unusable (`from_folder(skip_bad=True)`)

    def __post_init__(self):
        if not self.images:
            raise GeogenError(f"image source {self.source} holds no image")
        if not len(self.names) == len(self.images) == len(self.grey):
            raise ValueError("names, images and grey flags differ in length")

    def __len__(self) -> int:
        return len(self.images)

    def describe(self) -> dict:
        """The manifest entry: where the images came from and index -> name."""
        entry = {"source": self.source, "count": len(self), "names": list(self.names),
                 "grey": [i for i, g in enumerate(self.grey) if g],
                 "total_found": self.total_found or len(self)}
        if self.skipped:  # only then, so that other manifests keep their bytes
            entry["skipped"] = list(self.skipped)
        return entry

    def downscaled(self, min_side: int) -> "ImageBank":
        """A copy whose images have a shorter side of at most `min_side` (anti-aliased).

        Done once per worker so that per-sample resampling reads small arrays.
        """
        return replace(self, images=tuple(_shrink_array(im, min_side) for im in self.images),
                       pyramid=())

    def with_pyramid(self) -> "ImageBank":
        """A copy with a mip pyramid per image, for anti-aliased lookups at any scale.

        Level k pixel (i, j) is the mean of level-0 pixels [2^k i, 2^k (i+1)) x [2^k j, ...),
        so a level-0 coordinate x is x / 2^k at level k (an odd last row or column is dropped).
        """
        pyramid = []
        for image in self.images:
            levels = [image]
            while min(levels[-1].shape[:2]) >= 4:
                im = levels[-1]
                h, w = im.shape[0] // 2 * 2, im.shape[1] // 2 * 2
                levels.append(im[:h, :w].reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3)))
            pyramid.append(tuple(levels))
        return replace(self, pyramid=tuple(pyramid))

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, *, limit: int | None = None,
                    min_side: int | None = None, smallest: int | None = None,
                    skip_bad: bool = False) -> "ImageBank":
        """Load every image under `folder` (recursive, sorted by relative path).

        Args:
            limit: keep at most this many files, evenly spaced over the sorted list (so an
                ImageNet-style tree of class folders keeps images from every class); the
                files left out are never opened.
            min_side: shrink each image on load so its shorter side is at most this.
            smallest: refuse an image whose shorter side is below this many pixels.
            skip_bad: leave out the files that do not decode or are too small (listed in
                `skipped`, and in the manifest) instead of refusing the folder.
        """
        root = Path(folder)
        if not root.is_dir():
            raise GeogenError(f"image folder {root} does not exist or is not a folder")
        paths = list_images(root)
        if not paths:
            raise GeogenError(
                f"no readable image (JPEG, PNG, TIFF, GIF) under {root}")
        total = len(paths)
        if limit is not None and limit < total:
            if limit < 1:
                raise GeogenError(f"image limit must be at least 1, got {limit}")
            keep = np.unique(np.linspace(0, total - 1, limit).round().astype(int))
            paths = [paths[i] for i in keep]
        names, images, grey, bad = [], [], [], []
        for path in paths:
            try:
                image, is_grey = read_image(path, min_side, smallest)
            except UnusableImage as err:
                bad.append((path.relative_to(root).as_posix(), str(err)))
                continue
            names.append(path.relative_to(root).as_posix())
            images.append(image)
            grey.append(is_grey)
        if bad and not skip_bad:
            raise GeogenError(_unusable(root, bad) + "; pass --skip-bad-images to leave "
                              + ("it" if len(bad) == 1 else "them") + " out")
        if not images:
            raise GeogenError(_unusable(root, bad) + ": no usable image is left")
        return cls(str(root.resolve()), tuple(names), tuple(images), tuple(grey), total,
                   skipped=tuple(name for name, _ in bad))


def _unusable(root: Path, bad: list[tuple[str, str]]) -> str:
    """One line for the unusable files `bad` ((name, reason) each): the first reason, then
    up to NAMED more names."""
    if len(bad) == 1:
        return bad[0][1]
    more = [name for name, _ in bad[1:1 + NAMED]]
    rest = len(bad) - 1 - len(more)
    return (f"{len(bad)} images under {root} cannot be used: {bad[0][1]}; also "
            + ", ".join(more) + (f" and {rest} more" if rest else ""))


def list_images(root: Path) -> list[Path]:
    """Image files under `root` by extension (case-insensitive), sorted by relative path."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith("."):
                found.append(Path(dirpath) / name)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def read_image(path: Path, min_side: int | None = None,
               smallest: int | None = None) -> tuple[np.ndarray, bool]:
    """Decode one file to ((h, w, 3) float32 in [0, 1], grey flag); GIFs give their first frame.
    A file that does not decode, or whose shorter side is below `smallest`, is UnusableImage."""
    try:
        with Image.open(path) as img:
            if smallest is not None and min(img.size) < smallest:
                raise UnusableImage(f"image {path} is {img.size[0]} x {img.size[1]} px, smaller "
                                    f"than one {smallest} px sample")
            if min_side is not None and img.format == "JPEG":
                # Let the JPEG decoder skip resolution we would throw away (a power-of-2 reduction).
                img.draft("RGB", (min_side, min_side))
            img.load()
            array, is_grey = _pil_to_float(img)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise UnusableImage(f"cannot read image {path}: {err}") from None
    if array.size == 0:
        raise UnusableImage(f"cannot read image {path}: it is empty")
    if min_side is not None:
        array = _shrink_array(array, min_side)
    return array, is_grey


def _pil_to_float(img: Image.Image) -> tuple[np.ndarray, bool]:
    mode = img.mode
    if mode in _GREY_MODES:
        if mode in ("1", "LA"):
            img = img.convert("L")
        grey = np.asarray(img)
        if grey.dtype == np.uint8:
            grey = grey.astype(np.float32) / 255.0
        elif mode == "F":
            grey = np.clip(grey.astype(np.float32), 0.0, 1.0)
        else:  # 16-bit modes ("I;16*", and "I" as PIL opens 16-bit PNGs)
            grey = np.clip(grey.astype(np.float32) / 65535.0, 0.0, 1.0)
        return np.repeat(grey[:, :, None], 3, axis=2), True
    rgb = np.asarray(img.convert("RGB"))  # palette, RGBA, CMYK, ... -> (h, w, 3) uint8
    is_grey = bool(np.array_equal(rgb[..., 0], rgb[..., 1])
                   and np.array_equal(rgb[..., 1], rgb[..., 2]))
    return rgb.astype(np.float32) / 255.0, is_grey


def _shrink_array(image: np.ndarray, min_side: int) -> np.ndarray:
    """Resize so the shorter side is at most `min_side`; PIL's bilinear widens its kernel
    when it shrinks, so the result is anti-aliased."""
    h, w = image.shape[:2]
    short = min(h, w)
    if short <= min_side:
        return image
    scale = min_side / short
    new = (max(1, round(w * scale)), max(1, round(h * scale)))  # PIL sizes are (w, h)
    out = np.empty((new[1], new[0], 3), np.float32)
    for ch in range(3):
        plane = Image.fromarray(np.ascontiguousarray(image[..., ch], dtype=np.float32))
        out[..., ch] = np.asarray(plane.resize(new, Image.Resampling.BILINEAR))
    return np.clip(out, 0.0, 1.0)


# ----------------------------------------------------------------------------- defaults

def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from skimage import data  # imported here: only the default banks need it
        image = getattr(data, name)()
        return image[0] if name == "stereo_motorcycle" else image  # (left, right, disparity)
    return load


def _procedural(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from geogen.textures import texture_bank  # made once per process
        return dict(texture_bank())[name]  # (SIDE, SIDE) float32 grey levels in [0, 1]
    return load


def _sklearn(filename: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from sklearn.datasets import load_sample_image
        return load_sample_image(filename)
    return load


# (name, loader, crop or None)
DEFAULT_BACKGROUNDS: tuple[tuple[str, Callable[[], np.ndarray], Crop | None], ...] = (
    ("astronaut", _skimage("astronaut"), None),
    ("camera", _skimage("camera"), None),
    ("chelsea", _skimage("chelsea"), None),
    ("coffee", _skimage("coffee"), None),
    ("coins", _skimage("coins"), None),
    ("hubble_deep_field", _skimage("hubble_deep_field"), None),
    ("immunohistochemistry", _skimage("immunohistochemistry"), None),
    ("moon", _skimage("moon"), None),
    # The fundus is a disc on black; its inscribed square keeps crops photographic.
    ("retina", _skimage("retina"), (250, 1160, 250, 1160)),
    ("rocket", _skimage("rocket"), None),
    ("stereo_motorcycle", _skimage("stereo_motorcycle"), None),
    ("china", _sklearn("china.jpg"), None),
    ("flower", _sklearn("flower.jpg"), None),
)

_SKIMAGE_TEXTURES: tuple[tuple[str, Callable[[], np.ndarray], Crop | None], ...] = (
    ("brick", _skimage("brick"), None),
    ("grass", _skimage("grass"), None),
    ("gravel", _skimage("gravel"), None),
)


def _paper_textures() -> tuple[tuple[str, Callable[[], np.ndarray], Crop | None], ...]:
    from geogen.textures import REGISTRY  # the generators register when it is imported
    return _SKIMAGE_TEXTURES + tuple((name, _procedural(name), None) for name in REGISTRY)


CAMOUFLAGE_TEXTURES: tuple[tuple[str, Callable[[], np.ndarray], Crop | None], ...] = (
    *_SKIMAGE_TEXTURES,
    ("chelsea_fur", _skimage("chelsea"), (0, 90, 140, 300)),
    ("flower_petals", _sklearn("flower.jpg"), (120, 280, 240, 400)),
    ("immunohistochemistry", _skimage("immunohistochemistry"), None),
    ("camera_lawn", _skimage("camera"), (400, 512, 412, 512)),
    ("china_foliage", _sklearn("china.jpg"), (300, 427, 500, 640)),
)


def _default_bank(source: str, table, min_side: int | None) -> ImageBank:
    names, images, grey = [], [], []
    for name, load, crop in table:
        try:
            array = np.asarray(load())
        except Exception as err:  # a broken install should name the image, not crash deep inside
            raise GeogenError(f"bundled image {name} ({source}) does not load: {err}") from None
        if crop is not None:
            r0, r1, c0, c1 = crop
            array = array[r0:r1, c0:c1]
        if array.dtype.kind == "f":  # a generated texture: grey levels in [0, 1] already
            image, is_grey = np.repeat(array[:, :, None], 3, axis=2).astype(np.float32), True
        else:
            image, is_grey = _pil_to_float(Image.fromarray(np.ascontiguousarray(array)))
        if min_side is not None:
            image = _shrink_array(image, min_side)
        names.append(name)
        images.append(image)
        grey.append(is_grey)
    return ImageBank(source, tuple(names), tuple(images), tuple(grey))


def default_backgrounds(min_side: int | None = None) -> ImageBank:
    """Bundled photographs (see the module docstring); no network."""
    return _default_bank("default:backgrounds", DEFAULT_BACKGROUNDS, min_side)


def default_textures(min_side: int | None = None, look: str = DEFAULT_LOOK) -> ImageBank:
    """The bundled textures of a look (see the module docstring); no network. The camouflage
    bank keeps the former default's source name, so its manifest entry reads as it did."""
    if look == "camouflage":
        return _default_bank("default:textures", CAMOUFLAGE_TEXTURES, min_side)
    if look != "paper":
        raise GeogenError(f"look must be one of {', '.join(LOOKS)}, got {look!r}")
    return _default_bank("default:greyscale-textures", _paper_textures(), min_side)


def load_bank(folder: str | os.PathLike | None, kind: str, *, limit: int | None = None,
              min_side: int | None = None, smallest: int | None = None,
              skip_bad: bool = False, look: str = DEFAULT_LOOK) -> ImageBank:
    """`--backgrounds DIR` / `--textures DIR`, or the bundled default when no folder is given
    (`smallest` and `skip_bad` apply to a folder: see `ImageBank.from_folder`; `look` picks
    the bundled textures)."""
    if kind not in ("backgrounds", "textures"):
        raise ValueError(f"kind must be 'backgrounds' or 'textures', got {kind!r}")
    if folder is None:
        if kind == "backgrounds":
            return default_backgrounds(min_side)
        return default_textures(min_side, look)
    return ImageBank.from_folder(folder, limit=limit, min_side=min_side, smallest=smallest,
                                 skip_bad=skip_bad)
