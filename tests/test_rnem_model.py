"""R-NEM's E-step, relational cell and EM step (baselines/rnem/model.py)."""
import numpy as np
import pytest
import torch

from baselines.rnem import ModelConfig, RNEM, RnemError, e_step, schedule
from baselines.rnem.model import RelationalCell, read_step

TINY = ModelConfig(image_size=16, work_size=16, num_groups=4, enc_channels=(4, 8, 8),
                   enc_hidden=12, state_size=10, rel_hidden=8, att_hidden=6, dec_hidden=12)


def test_e_step_matches_gaussian_responsibilities_computed_directly():
    rng = np.random.default_rng(0)
    mu = rng.uniform(0, 1, (2, 3, 3, 4, 5))  # (B, K, C, H, W)
    x = rng.uniform(0, 1, (2, 3, 4, 5))  # (B, C, H, W)
    sigma = 0.3
    # p_k = prod_c N(x_c; mu_kc, sigma^2), with the normaliser; gamma_k = p_k / sum_j p_j
    dens = np.exp(-(x[:, None] - mu) ** 2 / (2 * sigma ** 2)) / np.sqrt(2 * np.pi * sigma ** 2)
    p = dens.prod(axis=2)  # (B, K, H, W)
    want = p / p.sum(axis=1, keepdims=True)
    got = e_step(torch.from_numpy(mu), torch.from_numpy(x), sigma)  # (B, K, 1, H, W)
    assert got.shape == (2, 3, 1, 4, 5)
    np.testing.assert_allclose(got[:, :, 0].numpy(), want, rtol=1e-6, atol=1e-9)


def test_e_step_epsilon_is_added_to_the_densities_as_the_official_code_does():
    rng = np.random.default_rng(1)
    mu = rng.uniform(0, 1, (2, 4, 3, 3, 3))  # (B, K, C, H, W)
    x = rng.uniform(0, 1, (2, 3, 3, 3))  # (B, C, H, W)
    sigma, eps = 0.07, 1e-6
    dens = np.exp(-(x[:, None] - mu) ** 2 / (2 * sigma ** 2)) / np.sqrt(2 * np.pi * sigma ** 2)
    p = dens.prod(axis=2) + eps  # (B, K, H, W)
    want = p / p.sum(axis=1, keepdims=True)
    got = e_step(torch.from_numpy(mu), torch.from_numpy(x), sigma, eps)[:, :, 0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert np.ptp(want) > 0.5  # some pixels are owned, not all shared


def test_e_step_is_sharp_where_one_group_predicts_the_pixel():
    mu = torch.zeros(1, 2, 3, 1, 1)
    mu[0, 1] = 1.0
    gamma = e_step(mu, torch.ones(1, 3, 1, 1), sigma=0.25)
    assert gamma[0, 1].item() > 0.999 and gamma[0, 0].item() < 1e-3


def test_relational_cell_is_equivariant_to_permuting_the_groups():
    torch.manual_seed(0)
    cell = RelationalCell(TINY).double()
    theta = torch.rand(3, 4, TINY.state_size, dtype=torch.float64)  # (B, K, D)
    x = torch.randn(3, 4, TINY.enc_hidden, dtype=torch.float64)  # (B, K, M)
    perm = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        out = cell(x, theta)  # (B, K, D)
        np.testing.assert_allclose(cell(x[:, perm], theta[:, perm]).numpy(),
                                   out[:, perm].numpy(), atol=1e-12)


def test_relational_cell_lets_the_other_groups_change_a_group_update():
    torch.manual_seed(0)
    cell = RelationalCell(TINY).double()
    theta = torch.rand(1, 4, TINY.state_size, dtype=torch.float64)
    x = torch.randn(1, 4, TINY.enc_hidden, dtype=torch.float64)
    out = cell(x, theta)
    moved = theta.clone()
    moved[0, 3] = torch.rand(TINY.state_size, dtype=torch.float64)  # only group 3's state
    again = cell(x, moved)
    assert not torch.allclose(again[0, 0], out[0, 0])  # group 0 hears group 3 through its pair


def test_em_step_is_batched_over_groups_and_equivariant():
    torch.manual_seed(0)
    model = RNEM(TINY).double()
    gen = torch.Generator().manual_seed(1)
    state = model.init_state(torch.full((2, 1, 3, 1, 1), 1.0, dtype=torch.float64), gen)
    state = state._replace(theta=torch.rand(2, 4, TINY.state_size, dtype=torch.float64),
                           mu=torch.rand(2, 4, 3, 16, 16, dtype=torch.float64),
                           gamma=state.gamma.double())
    x = torch.rand(2, 3, 16, 16, dtype=torch.float64)
    perm = torch.tensor([1, 3, 0, 2])
    new = model.step(state, x, x)
    groups = state._replace(**{f: getattr(state, f)[:, perm]
                               for f in ("theta", "mu", "mask", "gamma")})  # not the prior
    permuted = model.step(groups, x, x)
    for a, b in zip(permuted[:4], new[:4]):
        np.testing.assert_allclose(a.detach().numpy(), b[:, perm].detach().numpy(), atol=1e-10)
    assert torch.allclose(new.gamma.sum(1), torch.ones(2, 1, 16, 16, dtype=torch.float64))


def test_schedule_shows_each_frame_em_steps_times_and_predicts_the_next():
    assert schedule(2, 3) == [(0, 0), (0, 0), (0, 1), (1, 1), (1, 1)]
    assert schedule(3, 2) == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2)]
    assert schedule(1, 3) == [(0, 0), (0, 0)]


def test_one_step_per_frame_after_a_warm_up_predicts_the_next_frame_at_every_step():
    # R-NEM's schedule: frame 0 against itself W times, then each step's target the next frame
    assert schedule(4, 1, 2) == [(0, 0), (0, 0), (0, 1), (1, 2), (2, 3)]
    assert schedule(10, 1, 2)[2:] == [(t, t + 1) for t in range(9)]
    assert schedule(2, 3, 1) == [(0, 0), (0, 0), (0, 0), (0, 1), (1, 1), (1, 1)]
    # frame 0 is read after its last step against itself
    assert read_step(ModelConfig(em_steps=1, warmup=2)) == 1
    assert read_step(ModelConfig(em_steps=3, warmup=0)) == 1
    with pytest.raises(RnemError, match="em_steps"):
        ModelConfig(em_steps=1, warmup=0).validate()


def test_init_state_shared_draw_does_not_depend_on_the_batch():
    model = RNEM(TINY)
    a = model.init_state(torch.ones(1, 1, 3, 1, 1), torch.Generator().manual_seed(0),
                         shared=True).gamma
    b = model.init_state(torch.ones(5, 1, 3, 1, 1), torch.Generator().manual_seed(0),
                         shared=True).gamma
    assert torch.equal(a[0], b[3])
    assert torch.allclose(b.sum(1), torch.ones(5, 1, 16, 16))


def test_config_refuses_a_work_side_the_encoder_cannot_halve():
    from baselines.rnem import RnemError
    with pytest.raises(RnemError, match="work_size"):
        ModelConfig(image_size=60, work_size=60).validate()


def test_layers_start_as_the_official_code_initialises_them():
    # TF slim's defaults: Glorot-uniform weights, zero biases; the mask layer's bias alone
    # starts every mask at mask_init.
    torch.manual_seed(0)
    model = RNEM(TINY)
    mask_layer = model.decoder.conv[-1]
    for mod in model.modules():
        if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
            w = mod.weight
            field = w[0, 0].numel()
            bound = (6 / ((w.shape[0] + w.shape[1]) * field)) ** 0.5
            assert w.abs().max().item() <= bound + 1e-7
            assert w.abs().max().item() > 0.5 * bound  # not a narrower default
            if mod is not mask_layer:
                assert torch.count_nonzero(mod.bias) == 0
    m = TINY.mask_init
    assert torch.allclose(mask_layer.bias, torch.full_like(mask_layer.bias, np.log(m / (1 - m))))


def _three_squares(b: int = 2, side: int = 32) -> torch.Tensor:
    """Geo-like frames (B, C, H, W): a light flat background and three squares, each with one
    dominant channel."""
    x = torch.full((b, 3, side, side), 0.85)
    for i, (r, c) in enumerate([(4, 4), (4, 18), (18, 10)]):
        colour = torch.full((3,), 0.15)
        colour[i] = 0.9
        x[:, :, r:r + 9, c:c + 9] = colour[None, :, None, None]
    return x


def test_em_loop_at_initialisation_keeps_the_groups_apart():
    # The groups differ only by gamma's random start; if the untrained EM loop contracts that
    # difference, every group makes the same prediction and training cannot separate them
    # (gamma at 1/K everywhere). The profile's model must carry it through a clip's steps.
    from baselines.rnem.config import PROFILES
    cfg = PROFILES["quick"].model
    torch.manual_seed(0)
    model = RNEM(cfg)
    x = _three_squares()
    clip = torch.stack([x] * 5, 1)  # (B, T, C, H, W)
    with torch.no_grad():
        start = model.init_state(torch.ones(2, 1, 3, 1, 1),
                                 torch.Generator().manual_seed(0)).gamma.std(1).mean()
        states = model.run(clip, torch.Generator().manual_seed(0))
    last = states[-1].gamma.std(1).mean()  # (B, K, 1, H, W) spread over the groups
    assert last > 0.1 * start


def test_median_prior_is_each_clips_background_and_the_first_prediction():
    # Geo's background is one flat colour per clip; as the official's black prior is the balls'
    # background, the median prior lets every group explain the background at the start.
    model = RNEM(ModelConfig(**{**TINY.__dict__, "image_size": 32, "work_size": 32,
                                "prior": "median"}))
    x = _three_squares()
    x[1] = torch.where(x[1] == 0.85, torch.tensor(0.75), x[1])  # another background colour
    clip = torch.stack([x, x], 1)  # (B, T, C, H, W)
    with torch.no_grad():
        states = model.run(clip, torch.Generator().manual_seed(0))
    prior = states[0].prior[:, 0, :, 0, 0]  # (B, C)
    assert torch.allclose(prior, torch.tensor([[0.85] * 3, [0.75] * 3]))
    start = model.init_state(states[0].prior, torch.Generator().manual_seed(0))
    assert torch.allclose(start.mu[1], torch.full_like(start.mu[1], 0.75))
    fixed = RNEM(TINY)
    assert torch.equal(fixed.init_state(torch.ones(1, 1, 3, 1, 1), torch.Generator()).mu,
                       torch.ones(1, 4, 3, 16, 16))


def test_a_white_prior_hands_every_shape_to_the_background_group():
    # The cause of issue 51's one group: a group that paints Geo's near-white background
    # everywhere is nearer every shape's colour than a group at the white prior, so at the
    # profile's sigma the other groups' gamma on the shapes, and their gradient, is nil. The
    # groups at the prior tie with it instead when the prior is the background's colour, or
    # when the E-step adds the official epsilon to the densities (no group's density on the
    # shape reaches it); a group that does predict the shape's colour still takes it.
    from baselines.rnem.config import PROFILES
    sigma = PROFILES["quick"].model.sigma
    x = _three_squares(1, 32)  # (1, C, H, W): background 0.85, shapes 0.9 / 0.15
    shape = (slice(None), slice(None), slice(4, 13), slice(4, 13))
    for prior, eps, lone in ((1.0, 0.0, True), (0.85, 0.0, False), (1.0, 1e-6, False)):
        mu = torch.full((1, 5, 3, 32, 32), prior)
        mu[:, 0] = 0.85  # group 0 paints the background colour everywhere
        gamma = e_step(mu, x, sigma, eps)[:, :, 0]  # (1, K, H, W)
        others = gamma[:, 1:][shape].max().item()
        assert (others < 1e-6) == lone, (prior, eps, others)
        if prior == 1.0:  # the background stays group 0's (at its own colour, all share it)
            assert gamma[0, 0, 20, 2].item() > 0.99
    mu[0, 1, :, 4:13, 4:13] = torch.tensor([0.85, 0.2, 0.2])[:, None, None]  # near square 0
    gamma = e_step(mu, x, sigma, 1e-6)[:, :, 0]
    assert gamma[:, 1][shape[1:]].min().item() > 0.99


def test_a_per_pixel_colour_draws_a_free_image_that_starts_near_the_prior():
    # colour "group": every pixel of a group's mask carries the group's one colour, so the
    # colour recovered from mu = m c + (1 - m) prior is the same everywhere; "pixel" lets it
    # vary over the image (the official's free image), and only the mask's bias is set.
    torch.manual_seed(0)
    theta = torch.rand(3, TINY.state_size)  # (N, D)
    prior = torch.full((3, 3, 1, 1), 0.8)  # (N, C, 1, 1)
    spread = {}
    for colour in ("group", "pixel"):
        model = RNEM(ModelConfig(**{**TINY.__dict__, "colour": colour}))
        with torch.no_grad():
            mu, mask = model.decoder(theta, prior)  # (N, C, H, W), (N, 1, H, W)
        c = (mu - (1 - mask) * prior) / mask  # (N, C, H, W)
        spread[colour] = c.flatten(2).std(-1).max().item()
        assert abs(mask.mean().item() - TINY.mask_init) < 0.05
        assert (mu - prior).abs().max().item() < 0.3  # near the prior: the mask is small
    assert spread["group"] < 1e-5 < 1e-2 < spread["pixel"]
    bias = RNEM(ModelConfig(**{**TINY.__dict__, "colour": "pixel"})).decoder.conv[-1].bias
    m = TINY.mask_init
    assert bias.shape == (4,) and abs(bias[0].item() - np.log(m / (1 - m))) < 1e-6
    assert torch.count_nonzero(bias[1:]) == 0
    # "image": the official output, sigmoid per pixel and channel with zero biases, no mask
    official = RNEM(ModelConfig(**{**TINY.__dict__, "colour": "image"}))
    assert torch.count_nonzero(official.decoder.conv[-1].bias) == 0
    with torch.no_grad():
        mu, mask = official.decoder(theta, prior)  # (N, C, H, W), (N, 1, H, W)
    assert abs(mu.mean().item() - 0.5) < 0.1 and mu.flatten(2).std(-1).min().item() > 1e-3
    assert torch.allclose(mask, (mu - prior).abs().amax(1, keepdim=True))
    with pytest.raises(RnemError, match="colour"):
        ModelConfig(colour="free").validate()


def test_the_background_group_is_the_prior_beside_the_learned_groups():
    # With `background_group` the E-step has a fixed (K+1)-th component at the prior: it owns
    # the background when the prior is the clip's background (the learned groups' first
    # predictions lie a little off it) and the learned groups' gamma sums to 1 minus its
    # share, so no learned group needs to model the background.
    cfg = ModelConfig(**{**TINY.__dict__, "image_size": 32, "work_size": 32, "prior": "median",
                         "background_group": True})
    torch.manual_seed(0)
    model = RNEM(cfg)
    x = _three_squares()  # (B, C, H, W): background 0.85
    clip = torch.stack([x, x], 1)  # (B, T, C, H, W)
    with torch.no_grad():
        states = model.run(clip, torch.Generator().manual_seed(0))
        start = model.init_state(states[0].prior, torch.Generator().manual_seed(0))
    for s in [start, *states]:
        assert s.gamma.shape == (2, 4, 1, 32, 32)
        total = s.gamma.sum(1)  # (B, 1, H, W)
        assert total.max().item() < 1 + 1e-6 and total.min().item() < 0.99
    bg = 1 - states[-1].gamma.sum(1)[:, 0]  # (B, H, W) the background group's share
    assert bg[:, 0, 0].min().item() > states[-1].gamma[:, :, 0, 0, 0].max().item()
    no_bg = RNEM(ModelConfig(**{**cfg.__dict__, "background_group": False}))
    with torch.no_grad():
        assert torch.allclose(no_bg.run(clip, torch.Generator().manual_seed(0))[-1].gamma.sum(1),
                              torch.ones(2, 1, 32, 32))


def test_k_counts_the_background_group_once():
    from baselines.rnem.config import groups_for
    assert groups_for(3) == 5 and groups_for(3, background_group=True) == 4
