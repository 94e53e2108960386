"""Scene statistics over 2,000 samples match PSD's setup (lengths relative to the side L)."""
import numpy as np
import pytest

from geogen import schema
from geogen.make import MakeConfig
from geogen.variants import REGISTRY, sample_rng

N, L = 2000, 128
CONFIG = MakeConfig(n=N, size=L)


@pytest.fixture(scope="module")
def scenes():
    return [REGISTRY["geo"].draw(sample_rng(0, "train", i), CONFIG)[0] for i in range(N)]


def test_presence_patterns_follow_the_class_prior(scenes):
    labels = np.array([s.label for s in scenes])
    freq = np.bincount(labels, minlength=4) / N
    # Binomial standard error at N = 2000 is at most 0.011; allow 4 of them.
    assert np.allclose(freq, schema.CLASS_PRIOR, atol=0.045)
    for s in scenes[:50]:
        assert tuple(s.present) == schema.CLASS_PRESENCE[s.label]


def test_sizes_positions_and_motions_cover_their_ranges(scenes):
    pose = np.stack([s.pose for s in scenes]).astype(np.float64)     # (N, T, S, 4)
    size = pose[:, 0, :, 3] / L                                       # (N, S)
    assert size.min() >= 0.2 and size.max() < 0.3
    assert abs(size.mean() - 0.25) < 0.005                            # uniform: mean at the middle
    circle = pose[:, 0, 0, :2] / L - 0.5                              # (N, 2) offset from centre
    assert circle.min() >= -0.2 and circle.max() < 0.2 and circle.max() > 0.19
    child = pose[:, 0, 1:, :2] / L - pose[:, 0, :1, :2] / L           # (N, 2, 2) offsets
    assert child.min() >= -0.2 and child.max() < 0.2 and np.abs(child).max() > 0.19
    assert abs(np.std(child) - 0.4 / np.sqrt(12)) < 0.005             # uniform width 0.4
    move = (pose[:, 1, :, :2] - pose[:, 0, :, :2]) / L                # (N, S, 2)
    m = move[:, 0]
    assert np.allclose(m[:, 0], m[:, 1], atol=1e-5), "the circle moves by (m, m)"
    v = move[:, 1] - m                                                # square: + (0, v)
    h = move[:, 2] - m                                                # triangle: + (h, 0)
    assert np.allclose(v[:, 0], 0, atol=1e-5) and np.allclose(h[:, 1], 0, atol=1e-5)
    for x in (m[:, 0], v[:, 1], h[:, 0]):
        assert x.min() >= -0.1 - 1e-6 and x.max() < 0.1 + 1e-6 and np.abs(x).max() > 0.095
        assert abs(x.mean()) < 0.006
    assert np.all(pose[..., 2] == 0), "Geo does not rotate"


def test_colours_follow_the_dominant_channel_rule(scenes):
    bg = np.stack([s.background for s in scenes]).astype(int)        # (N, 3)
    assert bg.min() >= 181 and bg.max() <= 255
    cols = np.stack([s.colours for s in scenes]).astype(int)         # (N, S, 3)
    high = cols >= 181
    assert np.all(high.sum(-1) == 1) and np.all((cols < 75) | high)
    # Each scene uses each dominant channel once, shuffled among the slots.
    assert np.all(np.sort(high.argmax(-1), axis=1) == [0, 1, 2])
    circle_dominant = np.bincount(high[:, 0].argmax(-1), minlength=3) / N
    assert np.allclose(circle_dominant, 1 / 3, atol=0.05)


def test_every_sample_has_its_own_reproducible_stream():
    a = REGISTRY["geo"].draw(sample_rng(7, "test", 11), CONFIG)[0]
    b = REGISTRY["geo"].draw(sample_rng(7, "test", 11), CONFIG)[0]
    c = REGISTRY["geo"].draw(sample_rng(7, "val", 11), CONFIG)[0]
    assert np.array_equal(a.pose, b.pose) and not np.array_equal(a.pose, c.pose)


def test_own_motions_are_the_drawn_numbers_of_each_part(scenes):
    from geogen.scene import own_motions
    pose = np.stack([s.pose for s in scenes])  # (N, T, S, 4)
    m, v, h = own_motions(pose).T  # (N,) each
    vel = pose[:, 1, :, :2].astype(np.float64) - pose[:, 0, :, :2]  # (N, S, 2)
    expect = np.stack([np.stack([m, m], -1), np.stack([m, m + v], -1),
                       np.stack([m + h, m], -1)], 1)  # (N, S, 2): PSD's hierarchy
    assert np.allclose(vel, expect, atol=1e-3)
    for f in (m, v, h):  # uniform in [-0.1 L, 0.1 L): std 0.2 L / sqrt(12)
        assert np.abs(f).max() < 0.1 * L + 1e-3
        assert abs(f.std() - 0.2 * L / np.sqrt(12)) < 0.05 * L / np.sqrt(12)
