"""TF1-style RMSProp against two hand-computed steps (with momentum)."""
import math

import pytest
import torch

from baselines.scae.optim import RMSPropTF


def test_two_steps_with_momentum_by_hand():
    lr, rho, mu, eps = 0.1, 0.9, 0.5, 1e-2
    p = torch.nn.Parameter(torch.tensor([1.0]))
    opt = RMSPropTF([p], lr=lr, decay=rho, momentum=mu, eps=eps)
    g1, g2 = 2.0, -1.0
    # step 1: ms = 0.9 * 1 + 0.1 * 4 = 1.3 (ms starts at ONE); mom = 0.1 * 2 / sqrt(1.31)
    ms1 = rho * 1.0 + (1 - rho) * g1 ** 2
    mom1 = lr * g1 / math.sqrt(ms1 + eps)
    # step 2: ms = 0.9 * 1.3 + 0.1 * 1 = 1.27; mom = 0.5 * mom1 + 0.1 * (-1) / sqrt(1.28)
    ms2 = rho * ms1 + (1 - rho) * g2 ** 2
    mom2 = mu * mom1 + lr * g2 / math.sqrt(ms2 + eps)
    want = [1.0 - mom1, 1.0 - mom1 - mom2]
    assert math.isclose(ms1, 1.3) and math.isclose(ms2, 1.27)
    for g, expected in zip((g1, g2), want):
        p.grad = torch.tensor([g])
        opt.step()
        assert math.isclose(float(p.detach()), expected, rel_tol=1e-6)
    # 1 - 0.2 / sqrt(1.31) - (0.5 * 0.2 / sqrt(1.31) - 0.1 / sqrt(1.28))
    assert math.isclose(float(p.detach()), 0.826277, abs_tol=1e-6)


def test_differs_from_torch_rmsprop_on_the_first_step():
    # torch starts the mean square at zero and adds eps outside the root: a ~3x larger step
    a = torch.nn.Parameter(torch.tensor([0.0]))
    b = torch.nn.Parameter(torch.tensor([0.0]))
    tf_opt = RMSPropTF([a], lr=0.01, decay=0.9, eps=1e-10)
    torch_opt = torch.optim.RMSprop([b], lr=0.01, alpha=0.9, eps=1e-10)
    for p, opt in ((a, tf_opt), (b, torch_opt)):
        p.grad = torch.tensor([1.0])
        opt.step()
    assert math.isclose(float(a.detach()), -0.01 / math.sqrt(1.0), rel_tol=1e-5)
    assert math.isclose(float(b.detach()), -0.01 / math.sqrt(0.1), rel_tol=1e-5)


def test_state_round_trips_through_a_saved_state_dict():
    import io
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = RMSPropTF([p], lr=0.1, momentum=0.9)
    p.grad = torch.tensor([1.0, -1.0])
    opt.step()
    q = torch.nn.Parameter(p.detach().clone())
    opt2 = RMSPropTF([q], lr=0.1, momentum=0.9)
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)  # as a checkpoint does: no tensor shared with `opt`
    buf.seek(0)
    opt2.load_state_dict(torch.load(buf, weights_only=True))
    for x, o in ((p, opt), (q, opt2)):
        x.grad = torch.tensor([0.5, 0.5])
        o.step()
    assert torch.equal(p, q)


def test_refuses_bad_settings():
    with pytest.raises(ValueError):
        RMSPropTF([torch.nn.Parameter(torch.zeros(1))], lr=0.1, decay=1.0)
