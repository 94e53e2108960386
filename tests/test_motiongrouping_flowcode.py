"""The official's flow coding (baselines/motiongrouping/flowcode.py, its `--flow_to_rgb`):
hand-worked colours of the Middlebury wheel, white at rest, each image scaled by its own top
speed, and the model that reads it (its training step: tests/test_motiongrouping_trainer.py)."""
import pytest
import torch

from baselines.motiongrouping import ModelConfig, MotionGrouping, MotionGroupingError
from baselines.motiongrouping.flowcode import colour_wheel, flow_to_rgb, rgb_to_flow, top_speed


def _pixel(dx: float, dy: float, top: tuple[float, float] = (0.0, 0.0)) -> torch.Tensor:
    """The coding of pixel (0, 0) in a 1 x 2 flow image whose other pixel is `top`."""
    flow = torch.tensor([[[[dx, top[0]]], [[dy, top[1]]]]])  # (1, 2, 1, 2)
    return flow_to_rgb(flow)[0, :, 0, 0]  # (3,)


def test_the_wheel_has_the_middlebury_bins_and_colours():
    wheel = colour_wheel()
    assert wheel.shape == (55, 3)
    assert torch.equal(wheel[0], torch.tensor([1.0, 0.0, 0.0]))  # red
    assert torch.equal(wheel[15], torch.tensor([1.0, 1.0, 0.0]))  # yellow
    assert torch.equal(wheel[21], torch.tensor([0.0, 1.0, 0.0]))  # green
    assert torch.equal(wheel[25], torch.tensor([0.0, 1.0, 1.0]))  # cyan
    assert torch.equal(wheel[36], torch.tensor([0.0, 0.0, 1.0]))  # blue
    assert torch.equal(wheel[49], torch.tensor([1.0, 0.0, 1.0]))  # magenta
    assert torch.allclose(wheel[54], torch.tensor([1.0, 0.0, 1 / 6]))  # just short of red


def test_hand_worked_colours():
    # At rest: white, (1, 1, 1) after the map to [-1, 1]; an image with no motion stays white.
    assert torch.equal(flow_to_rgb(torch.zeros(2, 2, 4, 4)), torch.ones(2, 3, 4, 4))
    # Rightward at the image's top speed: bin 0, red.
    assert torch.allclose(_pixel(3.0, 0.0), torch.tensor([1.0, -1.0, -1.0]))
    # Half the top speed: halfway to white, (1, 0.5, 0.5) -> (1, 0, 0).
    assert torch.allclose(_pixel(1.5, 0.0, top=(3.0, 0.0)), torch.tensor([1.0, 0.0, 0.0]))
    # Leftward: angle 0, bin 27 = cyan-blue (0, 1 - 2/11, 1).
    assert torch.allclose(_pixel(-2.0, 0.0), torch.tensor([-1.0, 7 / 11, 1.0]), atol=1e-6)
    # Downward (dy > 0): angle -1/2, position 13.5, between bins 13 and 14: (1, 0.9, 0).
    assert torch.allclose(_pixel(0.0, 5.0), torch.tensor([1.0, 0.8, -1.0]), atol=1e-6)


def test_each_image_is_scaled_by_its_own_top_speed():
    flow = torch.randn(1, 2, 8, 8)
    both = torch.cat([flow, 7.5 * flow])  # (2, 2, 8, 8): the same motion at another scale
    rgb = flow_to_rgb(both)
    assert rgb.shape == (2, 3, 8, 8) and rgb.min() >= -1 and rgb.max() <= 1
    assert torch.allclose(rgb[0], rgb[1], atol=1e-5)
    assert not torch.allclose(flow_to_rgb(flow), flow_to_rgb(flow.flip(1)), atol=1e-2)


def test_the_rgb_model_reads_and_reconstructs_the_coding():
    cfg = ModelConfig(image_size=32, num_slots=3, iters=2, enc_channels=(4, 8, 8),
                      dec_channels=4, kernel_size=3, input_form="rgb", work_scale=2)
    assert cfg.channels == 3
    torch.manual_seed(0)
    model = MotionGrouping(cfg).eval()
    flow = 3 * torch.randn(2, 2, 32, 32)
    out = model(flow)
    assert out.recon.shape == (2, 3, 32, 32) and out.layers.shape == (2, 3, 2, 32, 32)
    assert torch.equal(out.target, flow_to_rgb(flow))
    assert out.flow.shape == (2, 2, 32, 32)  # the reconstruction decoded to pixels
    assert torch.allclose(out.flow, rgb_to_flow(out.recon, top_speed(flow)), atol=1e-6)
    coding_only = model(flow, pixels=False)  # as the training step asks
    assert coding_only.flow is None and torch.equal(coding_only.recon, out.recon)
    assert torch.allclose(out.alphas.sum(1), torch.ones(2, 32, 32), atol=1e-6)
    assert model.encoder.cnn[0].in_channels == 3
    with pytest.raises(MotionGroupingError, match="input_form must be one of uv, rgb"):
        ModelConfig(input_form="hsv").validate()



def test_the_coding_inverts_given_each_images_top_speed():
    torch.manual_seed(0)
    flow = 3 * torch.randn(4, 2, 16, 16)
    flow[1] = 0.0  # an image at rest
    flow[2, :, 0, 0] = torch.tensor([9.0, 0.0])  # its top speed, pure red (two channels tied)
    back = rgb_to_flow(flow_to_rgb(flow), top_speed(flow))
    assert torch.allclose(back, flow, atol=1e-4)
    # Each channel moved towards white by the same amount changes the speed, not the direction.
    halfway = ((flow_to_rgb(flow) + 1) / 2 * 0.5 + 0.5) * 2 - 1  # halfway to white
    faded = rgb_to_flow(halfway, top_speed(flow))
    assert torch.allclose(faded, 0.5 * flow, atol=1e-4)
