"""The inference calls take the obvious image forms and refuse the rest in one line."""
import numpy as np
import pytest
import torch

from flowcaps import FlowcapsError, FlowCapsules, RefineConfig, parse_refined
from flowcaps.inputs import as_images
from tiny_flowcaps import model_config

SMALL = model_config(image_size=32, num_capsules=3, capsule_dim=8, enc_channels=(4, 8),
                     enc_hidden=16, dec_hidden=8, dec_depth=2)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return FlowCapsules(SMALL).eval()


def _frames(b=2, seed=0) -> np.ndarray:
    """uint8 (B, H, W, 3), as geogen stores a frame."""
    return np.random.default_rng(seed).integers(0, 256, (b, 32, 32, 3), dtype=np.uint8)


def test_every_accepted_form_gives_the_same_capsules(model):
    u8 = _frames()                                                   # (B, H, W, 3) uint8
    ref = torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255     # (B, 3, H, W) in [0, 1]
    want = model.parse(ref)
    forms = {"uint8 channels-last numpy": u8,
             "uint8 channels-last torch": torch.from_numpy(u8),
             "uint8 channels-first": torch.from_numpy(u8).permute(0, 3, 1, 2),
             "float channels-first numpy": ref.numpy(),
             "float64 channels-last": u8.astype(np.float64) / 255}
    for name, images in forms.items():
        got = model.parse(images)
        assert torch.allclose(got.masks, want.masks, atol=1e-6), name
        assert torch.allclose(got.pose, want.pose, atol=1e-6), name
    one = model.parse(u8[1])                                         # no batch axis: B = 1
    assert one.masks.shape == (1, 3, 32, 32)
    assert torch.allclose(one.masks[0], want.masks[1], atol=1e-6)
    flow = model.flow(u8, u8[::-1].copy())
    assert torch.allclose(flow, model.flow(ref, ref.flip(0)), atol=1e-5)
    refined = parse_refined(model, u8, RefineConfig(steps=0))
    assert torch.allclose(refined.masks, want.masks, atol=1e-6)


@pytest.mark.parametrize("images, message", [
    (np.full((2, 32, 32, 3), 200.0, np.float32), "must be in [0, 1]"),       # 0-255 as float
    (torch.full((1, 3, 32, 32), 255.0), "must be in [0, 1]"),
    (np.zeros((2, 64, 64, 3), np.uint8), "for a model of 32 px"),            # wrong size
    (np.zeros((2, 32, 32, 4), np.uint8), "for a model of 32 px"),            # RGBA
    (np.zeros((2, 2, 32, 32, 3), np.uint8), "pass frames[:, t]"),            # geogen clips
    (np.zeros((32, 32), np.uint8), "expected images as uint8"),              # grey
    (np.zeros((2, 32, 32, 3), np.int64), "dtype int64"),
    (np.zeros((2, 32, 32, 3), bool), "dtype bool"),
    ([[0.0]], "type list"),
    (torch.full((1, 3, 32, 32), float("nan")), "NaN"),
])
def test_bad_images_are_one_line_errors(model, images, message):
    with pytest.raises(FlowcapsError) as err:
        model.parse(images)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_flow_refuses_batches_of_different_sizes(model):
    with pytest.raises(FlowcapsError, match="different numbers of images"):
        model.flow(_frames(2), _frames(3))


def test_float_images_pass_through_unchanged():
    x = torch.rand(2, 3, 32, 32)
    assert as_images(x, 32, torch.device("cpu")) is x, "no copy for the native form"
