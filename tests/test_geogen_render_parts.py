"""render_parts, the figures' renderer, is render_clip bit for bit (render_clip stays the
reference: it draws one slot of one frame at a time)."""
import dataclasses

import numpy as np
import pytest

from geogen import figure
from geogen.make import MakeConfig
from geogen.render import FlatAppearance, render_clip
from geogen.render_parts import render_parts
from geogen.variants import get_variant, sample_rng


def _assert_same(scene, appearance, size, supersample):
    args = (scene.pose, scene.present, appearance, size, supersample)
    want = render_clip(*args, kinds=scene.kinds, order=scene.order)
    got = render_parts(*args, kinds=scene.kinds, order=scene.order)
    assert want.keys() == got.keys()
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert np.array_equal(got[name], value), f"{name}: {(got[name] != value).sum()} differ"


@pytest.mark.parametrize("variant,motion,frames,size,supersample", [
    ("articulated", "translation", 2, 64, 5), ("articulated", "conformal", 3, 64, 5),
    ("articulated", "translation", 2, 32, 3), ("articulated", "conformal", 2, 48, 16),
    ("articulated+", "conformal", 2, 64, 5)])
def test_render_parts_is_render_clip_bit_for_bit(variant, motion, frames, size, supersample):
    config = MakeConfig(variant=variant, n=1, size=size, frames=frames, motion=motion,
                        supersample=supersample)
    for index in range(4 if variant == "articulated+" else 8):
        scene, appearance = get_variant(variant).draw(sample_rng(1, "train", index), config)
        _assert_same(scene, appearance, size, supersample)


def test_render_parts_is_render_clip_with_absent_parts_level_poses_and_slot_order():
    # The branches a drawn figure seldom takes: angle exactly 0 (a scaled shift), a part
    # partly outside the image, parts left out, and no drawing order (slot order).
    scene = figure.sample_figure_scene(sample_rng(0, "val", 3), 64, 2, "conformal")
    pose = scene.pose.copy()
    pose[:, 0, 2] = 0.0                    # the torso upright in both frames
    pose[1, 1] = pose[0, 1]                # the head stands still: a zero translation
    pose[:, 2, :2] += [-30.0, 0.0]         # an upper arm off the left edge
    present = np.ones(len(figure.PARTS), bool)
    present[[4, 9]] = False
    appearance = FlatAppearance(scene.colours, scene.background)
    for order in (scene.order, None):
        _assert_same(dataclasses.replace(scene, pose=pose, present=present, order=order),
                     appearance, 64, 5)
