"""The image mixture likelihood and the part-pose likelihood against direct numpy sums."""
import math

import numpy as np
import torch

from baselines.scae import ocae, pcae


def _np_gauss(x, mu, std):
    return np.exp(-0.5 * np.sum(((x - mu) / std) ** 2)) / (2 * math.pi * std ** 2) ** (len(x) / 2)


def test_image_mixture_matches_a_direct_sum():
    rng = np.random.default_rng(0)
    b, m, h, w, std = 2, 3, 4, 5, 0.3
    image = rng.uniform(size=(b, 3, h, w))
    colour = rng.uniform(size=(b, m, 3, h, w))
    alpha = rng.uniform(size=(b, m, h, w))
    alpha[0, 1, :2] = 0.0  # outside a template
    presence = rng.uniform(size=(b, m))
    bg = rng.uniform(size=(b, 3))
    bg_logit = 0.4
    rendered = pcae.Rendered(colour=torch.tensor(colour), alpha=torch.tensor(alpha))
    joint = pcae.mixture_log_terms(torch.tensor(image), rendered, torch.tensor(presence),
                                   torch.tensor(bg), torch.tensor(bg_logit), std)
    ll = pcae.image_log_likelihood(joint).numpy()
    resp = pcae.responsibilities(joint).numpy()
    for i in range(b):
        total = 0.0
        for y in range(h):
            for x in range(w):
                wts = [presence[i, k] * alpha[i, k, y, x] for k in range(m)] + [math.exp(bg_logit)]
                dens = [_np_gauss(image[i, :, y, x], colour[i, k, :, y, x], std) for k in range(m)]
                dens.append(_np_gauss(image[i, :, y, x], bg[i], std))
                mix = np.array(wts) * np.array(dens) / sum(wts)
                total += math.log(mix.sum())
                assert np.allclose(resp[i, :, y, x], mix / mix.sum(), atol=1e-12)
        assert math.isclose(ll[i], total, rel_tol=1e-9)
    assert np.all(resp[0, 1, :2] == 0)  # no responsibility outside a template


def test_part_pose_likelihood_matches_a_direct_sum():
    rng = np.random.default_rng(1)
    b, k, m = 2, 3, 4
    vote = rng.normal(size=(b, k, m, 6))
    scale = rng.uniform(0.5, 2.0, size=(b, k, m))
    pres = rng.uniform(size=(b, k, m))
    poses = rng.normal(size=(b, m, 6))
    part_pres = rng.uniform(size=(b, m))
    votes = ocae.Votes(vote=torch.tensor(vote), scale=torch.tensor(scale),
                       presence=torch.tensor(pres), object_presence=torch.tensor(pres.max(-1)),
                       dynamic_l2=torch.tensor(0.0))
    joint = ocae.capsule_log_terms(votes, torch.tensor(poses))
    ll = ocae.capsule_log_likelihood(joint, torch.tensor(part_pres)).numpy()
    post = ocae.part_posterior(joint).numpy()
    for i in range(b):
        total = 0.0
        for j in range(m):
            terms = [pres[i, c, j] * np.prod([_np_gauss(poses[i, j, d:d + 1], vote[i, c, j, d],
                                                         scale[i, c, j]) for d in range(6)])
                     for c in range(k)]
            dummy = 0.01 * 0.01  # weight 10^-2 times density 10^-2
            total += part_pres[i, j] * math.log(sum(terms) + dummy)
            assert np.allclose(post[i, j], np.array(terms) / (sum(terms) + dummy), atol=1e-9)
        assert math.isclose(ll[i], total, rel_tol=1e-9)
