"""Training on clips (`clip_frames` > 2): one encoder and decoder pass per frame, the same loss."""
import numpy as np
import pytest
import torch

from benchmark.bench import SUBJECTS, count_flops
from flowcaps import FlowcapsError, checkpoint
from flowcaps.losses import clip_loss, pair_loss
from flowcaps.model import FlowCapsules
from flowcaps.trainer import fit, load_pairs
from geogen.make import MakeConfig, make_dataset
from tiny_flowcaps import model_config, train_config

from test_flowcaps_train import tiny_config

SIDE = 16


def _clip(b: int, t: int, seed: int = 0) -> torch.Tensor:
    """A dark square moving 2 px a frame on a light background: (B, T, 3, H, W) in [0, 1]."""
    frames = torch.full((b, t, 3, SIDE, SIDE), 0.8)
    gen = torch.Generator().manual_seed(seed)
    for i in range(b):
        x, y = torch.randint(2, 6, (2,), generator=gen).tolist()
        for s in range(t):
            frames[i, s, :, y + s:y + s + 5, x + 2 * s:x + 2 * s + 5] = 0.1 * (i + 1)
    return frames


def test_clip_loss_is_the_mean_of_its_pairs_losses():
    """On the full grid (no sampling), a clip of 3 frames scores what its two pairs score, each
    in both directions: the rows of every direction are the right frames."""
    torch.manual_seed(0)
    model = FlowCapsules(model_config(image_size=SIDE, num_capsules=3, enc_channels=(8, 8, 8, 8),
                                      enc_hidden=16))
    cfg = train_config(points=0, smooth_points=16, edge_sampling=0.0, colour_shuffle=False,
                       bf16=False, clip_frames=3)
    frames = _clip(2, 3)
    got = clip_loss(model, frames, cfg, None)
    pairs = [pair_loss(model, frames[:, s], frames[:, s + 1], cfg, None) for s in range(2)]
    for name in ("total", "render", "smooth", "center"):
        want = (getattr(pairs[0], name) + getattr(pairs[1], name)) / 2
        assert torch.allclose(getattr(got, name), want, rtol=1e-5, atol=1e-7), name
    # and it is not the loss of other pairs: frames 0 -> 2 score differently
    skip = pair_loss(model, frames[:, 0], frames[:, 2], cfg, None)
    assert not torch.allclose(got.render, skip.render, rtol=1e-3)


def test_clip_loss_encodes_and_decodes_each_frame_once():
    torch.manual_seed(0)
    model = FlowCapsules(model_config(image_size=SIDE, num_capsules=3, enc_channels=(8, 8, 8, 8),
                                      enc_hidden=16))
    cfg = train_config(points=32, smooth_points=8, bf16=False, clip_frames=4)
    seen = {"encoder": [], "decoder": []}
    for name in seen:
        getattr(model, name).register_forward_hook(
            lambda mod, args, out, name=name: seen[name].append(args[0].shape[0]))
    gen = torch.Generator().manual_seed(0)
    clip_loss(model, _clip(2, 4), cfg, gen).total.backward()
    assert seen == {"encoder": [8], "decoder": [8]}  # B T rows, one call each


def test_clip_frames_settings_are_checked():
    with pytest.raises(FlowcapsError, match="clip_frames must be >= 2"):
        train_config(clip_frames=1).validate()
    with pytest.raises(FlowcapsError, match="needs both_directions"):
        train_config(clip_frames=3, both_directions=False).validate()
    with pytest.raises(FlowcapsError, match="multiple of 4"):
        train_config(clip_frames=5, batch_size=30).validate()


@pytest.fixture(scope="module")
def clips3(tmp_path_factory):
    out = tmp_path_factory.mktemp("clips3") / "d"
    return make_dataset(MakeConfig(n=12, val=0, test=2, size=32, frames=3, seed=5, out=str(out),
                                   workers=1), progress=False)


def test_clips_are_read_whole_and_their_length_checked(clips3):
    whole = load_pairs(clips3, "train", None, clip_frames=3)
    assert whole.shape == (12, 3, 32, 32, 3)
    assert np.array_equal(load_pairs(clips3, "train")[:2], whole[0, [[0, 1], [1, 2]]])
    with pytest.raises(FlowcapsError, match="clips of 3 frames; clip_frames is 4"):
        load_pairs(clips3, "train", clip_frames=4)


def test_fit_on_clips_counts_clips_and_steps_by_pairs(clips3, tmp_path):
    clips = load_pairs(clips3, "train", None, clip_frames=3)  # (12, 3, 32, 32, 3)
    cfg = tiny_config(tmp_path / "run", epochs=1, batch_size=8, clip_frames=3)
    meta = checkpoint.meta_of(checkpoint.read(fit(cfg, clips, progress=False)))
    assert meta["clips"] == 12 and meta["step"] == 3  # 4 clips (8 pairs) a step
    with pytest.raises(FlowcapsError, match=r"uint8 \(N, 3, H, W, 3\)"):
        fit(cfg.replace(out=str(tmp_path / "run2")), load_pairs(clips3, "train"), progress=False)


def test_bench_counts_the_encoder_once_per_frame():
    """FLOPs per pair: T / (2 (T - 1)) of the pairs' encoder convolutions."""
    per_pair = {}
    for t in (2, 5):
        sub = SUBJECTS["flowcaps"]("smoke", clip_frames=t, both_directions=True)
        _, per = count_flops(sub)
        pairs = len(sub.rows[0]) * (t - 1)
        per_pair[t] = sum(v for k, v in per.items() if k.endswith("encoder.convs.1")) / pairs
    assert per_pair[5] == pytest.approx(per_pair[2] * 5 / 8)
