"""The object capsule autoencoder: the Set Transformer's symmetry and the sparsity losses."""
import math

import torch

from baselines.scae import ocae
from baselines.scae.config import OCAEConfig

CFG = OCAEConfig(n_objects=3, st_layers=2, st_heads=2, st_dim=8, st_out=12, caps_params=6,
                 caps_hidden=10)


def _set_transformer(d_in=5):
    torch.manual_seed(0)
    return ocae.SetTransformer(d_in, CFG).double().eval()


def test_set_transformer_is_permutation_equivariant_then_invariant():
    st = _set_transformer()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 5, generator=g, dtype=torch.float64)  # (B, M, D)
    pres = torch.rand(2, 6, generator=g, dtype=torch.float64) * 0.9 + 0.1
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    per_part = st.encode_parts(x, pres)  # (B, M, O)
    assert torch.allclose(st.encode_parts(x[:, perm], pres[:, perm]), per_part[:, perm],
                          atol=1e-10)  # each part's encoding follows it
    pooled = st(x, pres)  # (B, K, O)
    assert torch.allclose(st(x[:, perm], pres[:, perm]), pooled, atol=1e-10)
    assert pooled.shape == (2, CFG.n_objects, CFG.st_out)
    # the K outputs differ from each other (K learned queries, not K copies)
    assert (pooled[:, 0] - pooled[:, 1]).abs().max() > 1e-3


def test_an_absent_part_is_ignored():
    st = _set_transformer()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, 4, 5, generator=g, dtype=torch.float64)
    extra = torch.randn(1, 1, 5, generator=g, dtype=torch.float64) * 10
    ones = torch.ones(1, 4, dtype=torch.float64)
    absent = torch.cat([ones, torch.zeros(1, 1, dtype=torch.float64)], 1)  # the extra part at 0
    with_absent = st(torch.cat([x, extra], 1), absent)
    assert torch.allclose(with_absent, st(x, ones), atol=1e-4)
    present = st(torch.cat([x, extra], 1), torch.ones(1, 5, dtype=torch.float64))
    assert (present - st(x, ones)).abs().max() > 1e-2  # the same part, present, does count


def test_prior_sparsity_hand_worked():
    pres = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # (B=2, K=2)
    within, between = ocae.prior_sparsity(pres, n_classes=2)
    # per example sums (1, 2) aimed at K/C = 1: (0 + 1) / 2; per capsule sums (2, 1) at B/C = 1
    assert math.isclose(float(within), 0.5) and math.isclose(float(between), 0.5)


def test_posterior_sparsity_hand_worked():
    mass = torch.tensor([[1.0, 0.0], [0.5, 0.5]])  # (B=2, K=2)
    within, between = ocae.posterior_sparsity(mass)
    assert math.isclose(float(within), math.log(2) / 2, rel_tol=1e-6)  # entropies 0 and log 2
    p = torch.tensor([0.75, 0.25])  # the batch's sum (1.5, 0.5), normalised
    assert math.isclose(float(between), float(-(p * p.log()).sum()), rel_tol=1e-6)


def test_votes_compose_object_and_part_poses():
    torch.manual_seed(3)
    caps = ocae.ObjectCapsules(n_parts=4, cfg=CFG).double()
    h = torch.randn(2, CFG.n_objects, CFG.st_out, dtype=torch.float64)
    votes = caps(h)  # no generator: no presence noise
    assert votes.vote.shape == (2, 3, 4, 6) and votes.presence.shape == (2, 3, 4)
    assert torch.all(votes.presence <= votes.object_presence[..., None] + 1e-12)
    assert torch.all(votes.scale > 1e-2)
    assert torch.equal(caps(h).vote, votes.vote)  # deterministic without noise
