import numpy as np
import pytest
from scipy import ndimage

from geogen import appearance as A
from geogen.sources import ImageBank, default_textures


def _bank(*images, grey=None):
    images = tuple(np.asarray(im, np.float32) for im in images)
    grey = grey or (False,) * len(images)
    return ImageBank("test", tuple(f"im{k}" for k in range(len(images))), images,
                     grey).with_pyramid()


def _ramp(h, w):
    """Red = x, green = y (normalised pixel centres), blue constant: linear in (x, y)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    return np.stack([(x + 0.5) / w, (y + 0.5) / h, np.full_like(x, 0.25)], -1)


@pytest.mark.parametrize("side", [12.0, 40.0, 70.0])  # mip levels 0, 1 and 2
def test_crop_resize_maps_the_box_onto_the_output_grid(side):
    h, w = 80, 90
    levels = _bank(_ramp(h, w)).pyramid[0]
    out = A.crop_resize(levels, x0=10.5, y0=4.0, side=side, size=16)  # (16, 16, 3)
    centres = (np.arange(16) + 0.5) * side / 16  # output pixel centres, in source pixels
    # Box means and bilinear reads of a linear image are exact: only the mapping can err.
    assert np.allclose(out[0, :, 0], (10.5 + centres) / w, atol=1e-4)
    assert np.allclose(out[:, 0, 1], (4.0 + centres) / h, atol=1e-4)
    assert np.allclose(out[..., 2], 0.25, atol=1e-5)
    flipped = A.crop_resize(levels, x0=10.5, y0=4.0, side=side, size=16, flip=True)
    assert np.allclose(flipped, out[:, ::-1])


def test_background_is_a_seeded_random_crop_with_flip():
    bank = _bank(_ramp(50, 70), _ramp(40, 40))
    a, ia = A.background(bank, np.random.default_rng(3), 24)
    b, ib = A.background(bank, np.random.default_rng(3), 24)
    assert a.shape == (24, 24, 3) and a.dtype == np.float32 and ia in (0, 1)
    assert ia == ib and np.array_equal(a, b)
    draws = {A.background(bank, np.random.default_rng(s), 24)[1] for s in range(20)}
    assert draws == {0, 1}
    # Flip probability 1 (0): red (= x) decreases (increases) along each row.
    never = A.BackgroundConfig(flip_prob=0.0)
    always = A.BackgroundConfig(flip_prob=1.0)
    up, _ = A.background(bank, np.random.default_rng(5), 24, never)
    down, _ = A.background(bank, np.random.default_rng(5), 24, always)
    assert np.all(np.diff(up[..., 0], axis=1) > 0)
    assert np.array_equal(down, up[:, ::-1])


def test_background_antialiases_fine_detail():
    board = (np.indices((200, 200)).sum(0) % 2).astype(np.float32)  # 1-pixel checkerboard
    bank = _bank(np.repeat(board[..., None], 3, 2))
    cfg = A.BackgroundConfig(scale=(0.9, 1.0))
    image, _ = A.background(bank, np.random.default_rng(0), 32, cfg)
    assert np.abs(image - 0.5).max() < 0.1  # point sampling would give 0s and 1s


def test_prepared_background_bank_is_small_but_not_upsampled():
    bank = ImageBank("test", ("a", "b"), (np.zeros((400, 600, 3), np.float32),
                                          np.zeros((50, 80, 3), np.float32)), (False, False))
    with pytest.raises(ValueError, match="prepare"):
        A.background(bank, np.random.default_rng(0), 32)
    prepared = A.prepare_backgrounds(bank, 32, A.BackgroundConfig(scale=(0.5, 1.0)))
    assert prepared.images[0].shape[:2] == (66, 99)  # smallest crop (0.5 x 66) still >= 32 px
    assert prepared.images[1].shape[:2] == (50, 80)
    image, _ = A.background(prepared, np.random.default_rng(0), 32)
    assert image.shape == (32, 32, 3)


def test_bilinear_matches_scipy_reference():
    rng = np.random.default_rng(0)
    image = rng.random((9, 13, 3), dtype=np.float32)
    x = rng.uniform(-2, 15, (7, 5))
    y = rng.uniform(-2, 11, (7, 5))
    got = A.bilinear(image, x, y)  # (7, 5, 3)
    # scipy indexes pixel centres at integers; ours sit at i + 0.5 (schema convention).
    want = np.stack([ndimage.map_coordinates(image[..., c], [y - 0.5, x - 0.5], order=1,
                                             mode="nearest") for c in range(3)], -1)
    assert got.shape == (7, 5, 3) and got.dtype == np.float32
    assert np.allclose(got, want, atol=1e-5)


def test_flat_fill_is_constant_and_has_no_source():
    fill = A.flat_fill((0.1, 0.5, 0.9))
    out = fill.colour(np.zeros((4, 6, 2)))
    assert out.shape == (4, 6, 3) and out.dtype == np.float32
    assert np.allclose(out, [0.1, 0.5, 0.9]) and fill.source == -1


def test_texture_maps_canonical_points_rigidly():
    image = _ramp(64, 64)
    fill = A.TextureFill(image, centre=(30.0, 34.0), span=20.0, angle=np.pi / 2,
                         tint=(1.0, 1.0, 1.0), source=0)
    q = np.array([[0.0, 0.0], [0.5, 0.0], [0.0, 0.5], [-0.3, 0.2]])
    # A quarter turn sends canonical +x to texture +y and +y to -x.
    tx = 30.0 - 20.0 * q[:, 1]
    ty = 34.0 + 20.0 * q[:, 0]
    got = fill.colour(q)
    assert np.allclose(got[:, 0], tx / 64, atol=1e-5) and np.allclose(got[:, 1], ty / 64, atol=1e-5)


def test_draw_texture_tints_only_grey_sources_and_keeps_the_stream_fixed():
    rng_img = np.random.default_rng(1)
    grey = np.repeat(rng_img.random((40, 40, 1), dtype=np.float32), 3, 2)
    colour = rng_img.random((30, 50, 3), dtype=np.float32)
    bank = _bank(grey, colour, grey=(True, False))
    seen = set()
    for seed in range(30):
        rng = np.random.default_rng(seed)
        fill = A.draw_texture(bank, rng, A.texture_config("camouflage"))
        seen.add(fill.source)
        if fill.source == 0:
            assert fill.tint != (1.0, 1.0, 1.0) and max(fill.tint) == pytest.approx(1.0)
        else:
            assert fill.tint == (1.0, 1.0, 1.0)
        # Whatever was drawn, the generator advanced by the same amount.
        ref = np.random.default_rng(seed)
        ref.random(7)
        assert rng.random() == ref.random()
    assert seen == {0, 1}
    for cfg in (A.TextureConfig(), A.texture_config("paper")):  # the paper's look: no tint
        assert A.draw_texture(bank, np.random.default_rng(0), cfg).tint == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("look", ["paper", "camouflage"])
def test_default_textures_stay_textured_inside_a_shape(look):
    bank = A.prepare_textures(default_textures(min_side=128, look=look))
    g = np.linspace(-0.5, 0.5, 24)
    xy = np.stack(np.meshgrid(g, g), -1)  # (24, 24, 2)
    disc = (xy ** 2).sum(-1) <= 0.25  # a circle of diameter 1 size unit
    rng = np.random.default_rng(0)
    stds = {k: [] for k in range(len(bank))}
    for _ in range(12 * len(bank)):  # a dozen draws per source on average
        fill = A.draw_texture(bank, rng, A.texture_config(look))
        rgb = fill.colour(xy)[disc]  # (P, 3)
        assert 0.0 <= rgb.min() and rgb.max() <= 1.0
        stds[fill.source].append(rgb.std(axis=0).mean())
    for k, values in stds.items():
        assert len(values) >= 3, bank.names[k]
        source_std = bank.images[k].std(axis=(0, 1)).mean()
        # Tints scale grey textures' contrast by at most ~0.65 on the weakest channel.
        assert np.median(values) > 0.4 * source_std, bank.names[k]


def test_texture_is_prefiltered_to_the_pixel_grid():
    g = np.linspace(-0.5, 0.5, 16)
    xy = np.stack(np.meshgrid(g, g), -1)  # (16, 16, 2): a 16-pixel shape's pixel centres
    ramp = _bank(_ramp(256, 256))
    rough = A.draw_texture(ramp, np.random.default_rng(2))
    fine = A.draw_texture(ramp, np.random.default_rng(2), pixels_per_unit=16.0)
    assert fine.image.shape[0] < 256 and rough.image.shape[0] == 256
    # A linear texture is unchanged by filtering: the patch maps points where the image did.
    assert np.allclose(fine.colour(xy), rough.colour(xy), atol=2e-3)
    board = (np.indices((256, 256)).sum(0) % 2).astype(np.float32)  # 1-pixel checkerboard
    bank = _bank(np.repeat(board[..., None], 3, 2))
    aliased = A.draw_texture(bank, np.random.default_rng(0)).colour(xy)
    smooth = A.draw_texture(bank, np.random.default_rng(0), pixels_per_unit=16.0).colour(xy)
    assert aliased.std() > 0.1  # ~100 texture pixels per output pixel: point samples alias
    assert np.abs(smooth - 0.5).max() < 0.05


def test_sample_appearance_speaks_the_renderer_protocol():
    fills = (A.flat_fill((1.0, 0.0, 0.0)), A.flat_fill((0.0, 1.0, 0.0)),
             A.TextureFill(_ramp(8, 8), (4.0, 4.0), 4.0, 0.0, (1.0, 1.0, 1.0), 0))
    image = np.full((5, 5, 3), 0.3, np.float32)
    look = A.SampleAppearance(fills, image)
    uv = np.zeros((2, 3, 2))
    assert np.allclose(look.fill(1, uv), (0.0, 1.0, 0.0))
    assert np.allclose(look.fill(2, uv)[..., 0], 0.5, atol=1e-6)  # texture centre = image centre
    assert look.background(np.zeros((5, 5, 2))) is image
    with pytest.raises(ValueError):
        look.background(np.zeros((4, 5, 2)))
