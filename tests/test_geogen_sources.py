import socket

import numpy as np
import pytest
from PIL import Image

from geogen import sources
from geogen.errors import GeogenError


def _write_tree(root):
    """A small tree mixing formats, modes and folders; returns name -> expected (h, w, 3) array."""
    rng = np.random.default_rng(0)
    colour = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (4, 7), dtype=np.uint8)
    deep16 = (np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000)
    (root / "b").mkdir()
    (root / "a" / "z").mkdir(parents=True)
    Image.fromarray(colour).save(root / "b" / "colour.png")
    Image.fromarray(grey).save(root / "a" / "grey.PNG")  # extension case must not matter
    Image.fromarray(colour).save(root / "a" / "z" / "colour.tif")
    Image.fromarray(deep16).save(root / "a" / "deep16.png")
    Image.fromarray(colour).convert("P").save(root / "pal.gif")
    # JPEG is lossy and subsamples colour: a smooth image survives it nearly unchanged.
    gx, gy = np.meshgrid(np.linspace(40, 200, 16), np.linspace(60, 180, 12))
    smooth = np.stack([gx, gy, np.full_like(gx, 128.0)], -1).astype(np.uint8)
    Image.fromarray(smooth).save(root / "photo.jpg", quality=95)
    (root / "notes.txt").write_text("not an image")
    pal = np.asarray(Image.fromarray(colour).convert("P").convert("RGB"))
    return {
        "a/deep16.png": (np.repeat(deep16[..., None], 3, 2) / 65535.0, True),
        "a/grey.PNG": (np.repeat(grey[..., None], 3, 2) / 255.0, True),
        "a/z/colour.tif": (colour / 255.0, False),
        "b/colour.png": (colour / 255.0, False),
        "pal.gif": (pal / 255.0, False),
        "photo.jpg": (smooth / 255.0, False),
    }


def test_folder_bank_reads_every_format_in_stable_order(tmp_path):
    expected = _write_tree(tmp_path)
    bank = sources.ImageBank.from_folder(tmp_path)
    assert bank.names == tuple(sorted(expected))  # sorted relative paths; the .txt is ignored
    for name, image, grey in zip(bank.names, bank.images, bank.grey):
        want, want_grey = expected[name]
        assert image.dtype == np.float32 and image.shape == want.shape
        assert 0.0 <= image.min() and image.max() <= 1.0
        assert grey == want_grey, name
        tol = 0.02 if name.endswith(".jpg") else 1e-6  # JPEG is lossy, the rest exact
        assert np.abs(image - want).mean() < tol, name
    desc = bank.describe()
    assert desc["source"] == str(tmp_path.resolve())
    assert desc["count"] == 6 and desc["names"] == list(bank.names)
    assert desc["grey"] == [0, 1]


def test_limit_keeps_an_evenly_spaced_subset(tmp_path):
    for k in range(10):
        Image.fromarray(np.full((4, 4), k * 20, np.uint8)).save(tmp_path / f"{k:02d}.png")
    bank = sources.ImageBank.from_folder(tmp_path, limit=4)
    assert bank.names == ("00.png", "03.png", "06.png", "09.png")
    assert bank.describe()["total_found"] == 10
    assert np.allclose(bank.images[1], 60 / 255)


def test_missing_empty_and_unreadable_inputs_name_the_culprit(tmp_path):
    with pytest.raises(GeogenError, match="nowhere"):
        sources.ImageBank.from_folder(tmp_path / "nowhere")
    (tmp_path / "readme.txt").write_text("x")
    with pytest.raises(GeogenError, match=f"no readable image.*{tmp_path.name}"):
        sources.ImageBank.from_folder(tmp_path)
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "ok.png")
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8 definitely not a jpeg")
    with pytest.raises(GeogenError, match="broken.jpg"):
        sources.ImageBank.from_folder(tmp_path)


def test_downscaling_shrinks_and_antialiases():
    board = (np.indices((64, 96)).sum(0) % 2).astype(np.float32)  # 1-pixel checkerboard
    bank = sources.ImageBank("test", ("board",), (np.repeat(board[..., None], 3, 2),), (True,))
    small = bank.downscaled(16).images[0]
    assert small.shape == (16, 24, 3)
    # Point sampling would give 0s and 1s; an anti-aliased shrink averages to grey.
    assert np.abs(small[2:-2, 2:-2] - 0.5).max() < 0.05
    assert bank.downscaled(100).images[0] is bank.images[0]  # already small enough


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network disabled in tests")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_default_banks_load_offline(no_network):
    bg = sources.load_bank(None, "backgrounds", min_side=48)
    tex = sources.load_bank(None, "textures", min_side=48)
    assert bg.source == "default:backgrounds" and len(bg) == 13
    assert {"astronaut", "retina", "china", "flower", "stereo_motorcycle"} <= set(bg.names)
    assert tex.names[:3] == ("brick", "grass", "gravel")
    grey_bg = {bg.names[i] for i in bg.describe()["grey"]}
    assert grey_bg == {"camera", "coins", "moon"}
    assert set(tex.describe()["grey"]) == set(range(len(tex)))  # the paper look: all grey
    camouflage = sources.load_bank(None, "textures", min_side=48, look="camouflage")
    assert {camouflage.names[i] for i in camouflage.describe()["grey"]} == {
        "brick", "grass", "gravel", "camera_lawn"}
    for bank in (bg, tex):
        for name, image in zip(bank.names, bank.images):
            assert image.dtype == np.float32 and image.ndim == 3 and image.shape[2] == 3
            assert min(image.shape[:2]) <= 48 and 0 <= image.min() and image.max() <= 1
            # Photographs and textures, not flat fills (nor the retina's black surround).
            assert image.std() > 0.03, name
            assert np.ptp(image.mean(-1)) > 0.2, name


def test_pyramid_levels_are_block_means():
    rng = np.random.default_rng(0)
    image = rng.random((11, 20, 3), dtype=np.float32)
    bank = sources.ImageBank("test", ("x",), (image,), (False,)).with_pyramid()
    levels = bank.pyramid[0]
    assert [lv.shape[:2] for lv in levels] == [(11, 20), (5, 10), (2, 5)]
    assert levels[0] is image
    # Level-2 pixel (1, 3) averages level-0 rows 4..7 and columns 12..15.
    assert np.isclose(levels[2][1, 3, 0], image[4:8, 12:16, 0].mean(), atol=1e-6)
    assert all(lv.dtype == np.float32 for lv in levels)
