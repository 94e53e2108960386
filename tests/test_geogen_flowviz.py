"""The project's one flow colour wheel: zero flow white, direction as hue, length as saturation."""
import numpy as np
import pytest

from geogen import sheet
from geogen.flowviz import flow_key, flow_to_rgb, max_length


def _hue(rgb):
    from skimage.color import rgb2hsv
    return float(rgb2hsv(rgb[None, None] / 255.0)[0, 0, 0])


def test_zero_flow_is_white_and_opposite_directions_differ_in_hue():
    flow = np.array([[[0, 0], [3, 0], [-3, 0], [0, 3], [0, -3], [1.5, 0]]], np.float32)  # (1, 6, 2)
    rgb = flow_to_rgb(flow, 3.0)
    assert rgb[0, 0].tolist() == [255, 255, 255]
    right, left, down, up, half = rgb[0, 1:]
    assert abs(_hue(right) - _hue(left)) == pytest.approx(0.5, abs=0.01)  # across the wheel
    assert abs(_hue(down) - _hue(up)) == pytest.approx(0.5, abs=0.01)
    assert abs(_hue(right) - _hue(down)) == pytest.approx(0.25, abs=0.01)
    assert right.min() < half.min() < 255, "a shorter flow is paler"
    assert np.array_equal(flow_to_rgb(np.moveaxis(flow, -1, 0), 3.0, axis=0), rgb)


def test_the_key_reads_like_the_flows_it_explains():
    key = flow_key(33)                                         # (33, 33, 3)
    assert key[16, 16].tolist() == [255, 255, 255], "the centre is zero flow"
    edge = np.array([[[16.0, 0.0], [0.0, 16.0]]])              # right and down, full length
    assert np.array_equal(key[16, 32], flow_to_rgb(edge, 16.0)[0, 0])
    assert np.array_equal(key[32, 16], flow_to_rgb(edge, 16.0)[0, 1])
    assert max_length([np.zeros((4, 4, 2)), np.full((2, 2, 2), 3.0)]) == np.hypot(3, 3)


def test_geogen_show_and_flowbench_show_share_the_wheel():
    from benchmark import figures
    assert figures.flow_to_rgb is sheet.flow_to_rgb
