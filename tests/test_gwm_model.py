"""The Guess What Moves mask network: one frame in, K soft masks out that sum to 1 at every
pixel; nothing but the frame goes in, and bad settings are one line."""
import pytest
import torch

from baselines.gwm import GwmError, MaskNet, ModelConfig


def test_the_masks_have_k_channels_and_sum_to_one():
    cfg = ModelConfig(image_size=32, num_masks=5, widths=(8, 16, 16), groups=4)
    torch.manual_seed(0)
    net = MaskNet(cfg).eval()
    frame = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    out = net(frame)
    assert out.masks.shape == (3, 5, 32, 32) and out.logits.shape == (3, 5, 32, 32)
    assert out.features.shape == (3, 8, 32, 32)
    assert torch.allclose(out.masks.sum(1), torch.ones(3, 32, 32), atol=1e-5)
    assert out.masks.min() >= 0 and out.masks.max() <= 1
    # each image's masks depend on that image alone (no batch statistics)
    assert torch.allclose(net(frame[1:2]).masks, out.masks[1:2], atol=1e-5)
    assert not torch.allclose(out.masks[0], out.masks[1])


@pytest.mark.parametrize("changes, message", [
    ({"num_masks": 1}, "num_masks must be >= 2"),
    ({"widths": ()}, "widths must be non-empty"),
    ({"groups": 3}, "groups must be >= 1 and divide every width"),
    ({"image_size": 30}, "image_size must be a multiple of 4"),
])
def test_bad_settings_are_one_line(changes, message):
    cfg = ModelConfig(image_size=32, widths=(8, 16, 16), groups=4)
    with pytest.raises(GwmError, match=message):
        MaskNet(ModelConfig(**{**cfg.__dict__, **changes}))
