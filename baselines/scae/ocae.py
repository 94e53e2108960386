"""Object capsule autoencoder (SCAE, Sec. 2.1 and 2.3): object capsules that explain part poses.

Letters: B batch, M parts, D part input size, K object capsules, E encoder width (st_dim),
O object encoding width (st_out), Q per-capsule parameters.

A Set Transformer reads the set of parts (no order) into K object encodings. Each object
capsule k (its own MLP weights) predicts its pose OV_k, a presence a_k, and for every part m a
vote V_km = OV_k OP_km (OP = a learned static part of the object-part relation plus an
input-dependent deformation), a vote presence a_k a_km and a vote scale. Part m's pose is
modelled as a mixture over k of Gaussians around V_km (plus a dummy component), weighted by
the vote presences, as in the official code (the weights are not renormalised).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from baselines.scae import geometry
from baselines.scae.config import OCAEConfig

LOG_DUMMY = -2 * math.log(10.0)  # the dummy component's log-density and its log-weight


def _mask_logit(presence: torch.Tensor | None) -> torch.Tensor | float:
    """log presence added to attention logits: an absent part is not attended to."""
    return 0.0 if presence is None else torch.log(presence.clamp_min(1e-6))[:, None, :]


class MultiHeadAttention(nn.Module):
    """SCAE's multi-head QKV attention: per-head linear maps, then a linear on the concat."""

    def __init__(self, d_query: int, d_key: int, d_value: int, heads: int):
        super().__init__()
        self.heads = heads
        self.dq, self.dv = math.ceil(d_query / heads), math.ceil(d_value / heads)
        self.q = nn.Linear(d_query, self.dq * heads)
        self.k = nn.Linear(d_key, self.dq * heads)
        self.v = nn.Linear(d_value, self.dv * heads)
        self.out = nn.Linear(self.dv * heads, d_value)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                presence: torch.Tensor | None = None) -> torch.Tensor:
        """queries (B, Nq, dq), keys/values (B, Nk, *), presence (B, Nk) -> (B, Nq, d_value)."""
        b, nq, nk, h = queries.shape[0], queries.shape[1], keys.shape[1], self.heads
        q = self.q(queries).view(b, nq, h, self.dq).transpose(1, 2)  # (B, h, Nq, dq)
        k = self.k(keys).view(b, nk, h, self.dq).transpose(1, 2)  # (B, h, Nk, dq)
        v = self.v(values).view(b, nk, h, self.dv).transpose(1, 2)  # (B, h, Nk, dv)
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.dq)  # (B, h, Nq, Nk)
        mask = _mask_logit(presence)
        if not isinstance(mask, float):
            mask = mask[:, None]  # (B, 1, 1, Nk)
        att = torch.softmax(logits + mask, -1)
        out = (att @ v).transpose(1, 2).reshape(b, nq, h * self.dv)  # (B, Nq, h*dv)
        return self.out(out)


class SelfAttentionBlock(nn.Module):
    """x + attention, masked by presence, layer norm; then + MLP, layer norm."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn = MultiHeadAttention(dim, dim, dim, heads)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor, presence: torch.Tensor | None) -> torch.Tensor:
        y = self.attn(x, x, x, presence) + x  # (B, M, E)
        if presence is not None:
            y = y * presence[..., None]
        y = self.norm1(y)
        return self.norm2(self.mlp(y) + y)


class SetTransformer(nn.Module):
    """Parts (B, M, D) -> object encodings (B, K, O): self-attention blocks, then pooling by
    attention with K learned queries (permutation-invariant in the parts)."""

    def __init__(self, d_in: int, cfg: OCAEConfig):
        super().__init__()
        self.inp = nn.Linear(d_in, cfg.st_dim)
        self.blocks = nn.ModuleList(SelfAttentionBlock(cfg.st_dim, cfg.st_heads)
                                    for _ in range(cfg.st_layers))
        self.proj = nn.Linear(cfg.st_dim, cfg.st_out)
        self.queries = nn.Parameter(torch.randn(cfg.n_objects, cfg.st_out) / math.sqrt(cfg.st_out))
        self.pool = MultiHeadAttention(cfg.st_out, cfg.st_out, cfg.st_out, cfg.st_heads)

    def encode_parts(self, x: torch.Tensor, presence: torch.Tensor | None) -> torch.Tensor:
        h = self.inp(x)  # (B, M, E)
        for block in self.blocks:
            h = block(h, presence)
        return self.proj(h)  # (B, M, O)

    def forward(self, x: torch.Tensor, presence: torch.Tensor | None = None) -> torch.Tensor:
        z = self.encode_parts(x, presence)  # (B, M, O)
        q = self.queries[None].expand(x.shape[0], -1, -1)  # (B, K, O)
        return self.pool(q, z, z, presence)  # (B, K, O)


class CapsuleLinear(nn.Module):
    """K independent linear maps, one per object capsule: (B, K, i) -> (B, K, o)."""

    def __init__(self, k: int, d_in: int, d_out: int, bias: bool = True):
        super().__init__()
        std = 1 / math.sqrt(d_in)
        self.weight = nn.Parameter(nn.init.trunc_normal_(torch.empty(k, d_in, d_out), std=std,
                                                         a=-2 * std, b=2 * std))
        self.bias = nn.Parameter(torch.zeros(k, d_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.einsum("bki,kio->bko", x, self.weight)
        return y if self.bias is None else y + self.bias


@dataclass
class Votes:
    vote: torch.Tensor  # (B, K, M, 6) predicted part poses, row-major 2x3
    scale: torch.Tensor  # (B, K, M) std of each vote
    presence: torch.Tensor  # (B, K, M) vote presence a_k a_km
    object_presence: torch.Tensor  # (B, K) a_k = max_m a_k a_km (SCAE's caps_presence_prob)
    dynamic_l2: torch.Tensor  # () squared size of the input-dependent OP deformations


class ObjectCapsules(nn.Module):
    """Object encodings (B, K, O) -> votes for the M parts' poses."""

    def __init__(self, n_parts: int, cfg: OCAEConfig):
        super().__init__()
        k, m, q, hid = cfg.n_objects, n_parts, cfg.caps_params, cfg.caps_hidden
        self.cfg, self.m = cfg, m
        self.params = nn.Sequential(CapsuleLinear(k, cfg.st_out, hid), nn.ReLU(),
                                    CapsuleLinear(k, hid, q))
        self.split = (m * 6, 6, 1, m, m)  # OP deformation, OV, presence, vote presences, scales
        # no output bias, so the deformation has no static part; the others get their own bias
        self.out = nn.Sequential(CapsuleLinear(k, q + 1, hid), nn.ReLU(),
                                 CapsuleLinear(k, hid, sum(self.split), bias=False))
        self.bias = nn.Parameter(torch.zeros(k, sum(self.split[1:])))
        limit = math.sqrt(6 / (k * (m + 6)))  # Glorot-uniform over (M, 6) fans times K
        self.op_static = nn.Parameter(torch.empty(k, m, 6).uniform_(-limit, limit))

    def forward(self, h: torch.Tensor, gen: torch.Generator | None = None) -> Votes:
        b, k = h.shape[:2]
        params = self.params(h)  # (B, K, Q)
        params = torch.cat([params, torch.ones_like(params[..., :1])], -1)  # (B, K, Q+1)
        raw = self.out(params)  # (B, K, sum(split))
        dyn = raw[..., :self.split[0]].view(b, k, self.m, 6)  # (B, K, M, 6)
        rest = raw[..., self.split[0]:] + self.bias  # (B, K, 6 + 1 + M + M)
        ov, pres, vote_pres, scale = rest.split(self.split[1:], -1)
        pres = pres.squeeze(-1)  # (B, K)
        if gen is not None and self.cfg.presence_noise > 0:
            w = self.cfg.presence_noise
            pres = pres + (torch.rand(pres.shape, generator=gen, device=h.device) - 0.5) * w
            vote_pres = vote_pres + (torch.rand(vote_pres.shape, generator=gen,
                                                device=h.device) - 0.5) * w
        ov = geometry.geometric_transform(ov)  # (B, K, 2, 3)
        op = geometry.geometric_transform(dyn + self.op_static)  # (B, K, M, 2, 3)
        vote = geometry.compose(ov[:, :, None], op).flatten(-2)  # (B, K, M, 6)
        vote_presence = torch.sigmoid(pres)[..., None] * torch.sigmoid(vote_pres)  # (B, K, M)
        return Votes(vote=vote, scale=F.softplus(scale + 0.5) + 1e-2, presence=vote_presence,
                     object_presence=vote_presence.amax(-1),
                     dynamic_l2=0.5 * dyn.pow(2).sum() / b)


def capsule_log_terms(votes: Votes, poses: torch.Tensor) -> torch.Tensor:
    """log weight + log density of each part pose under each vote, the dummy last.

    poses (B, M, 6); returns (B, M, K+1). The weight of vote (k, m) is its presence a_k a_km
    (not renormalised, as in the official code); the dummy has weight 0.01 and density 0.01.
    """
    x = poses[:, None]  # (B, 1, M, 6)
    std = votes.scale[..., None]  # (B, K, M, 1)
    log_n = (-0.5 * ((x - votes.vote) / std).pow(2) - torch.log(std)
             - 0.5 * math.log(2 * math.pi)).sum(-1)  # (B, K, M)
    joint = torch.log(votes.presence.clamp_min(1e-16)) + log_n  # (B, K, M)
    dummy = torch.full_like(joint[:, :1], 2 * LOG_DUMMY)  # (B, 1, M)
    return torch.cat([joint, dummy], 1).transpose(1, 2)  # (B, M, K+1)


def capsule_log_likelihood(joint: torch.Tensor, part_presence: torch.Tensor) -> torch.Tensor:
    """sum_m presence_m log sum_k (...), one number per example: (B,)."""
    return (torch.logsumexp(joint, -1) * part_presence).sum(-1)


def part_posterior(joint: torch.Tensor) -> torch.Tensor:
    """Which object capsule explains each part: (B, M, K), the dummy dropped."""
    return torch.softmax(joint, -1)[..., :-1]


def _entropy(p: torch.Tensor) -> torch.Tensor:
    """-sum p log p over the last axis (0 log 0 = 0)."""
    return -(p * torch.log(p.clamp_min(1e-16))).sum(-1)


def posterior_sparsity(mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SCAE's entropy terms on the posterior presences (B, K), each normalised over K.

    within: the mean entropy of each example's capsule distribution (minimised: an example is
    explained by few capsules); between: the entropy of the batch's summed distribution
    (maximised: every capsule is used across the batch).
    """
    within = _entropy(mass / (mass.sum(1, keepdim=True) + 1e-8)).mean()
    total = mass.sum(0)  # (K,)
    between = _entropy(total / (total.sum() + 1e-8))
    return within, between


def prior_sparsity(presence: torch.Tensor, n_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SCAE's squared-count terms on the prior presences (B, K), both minimised.

    within: each example turns on about K / n_classes capsules; between: each capsule is on
    in about B / n_classes examples of a batch.
    """
    b, k = presence.shape
    within = (presence.sum(1) - k / n_classes).pow(2).mean()
    between = (presence.sum(0) - b / n_classes).pow(2).mean()
    return within, between


@dataclass
class OCAEOutput:
    log_likelihood: torch.Tensor  # () mean over the batch of the part-pose log-likelihood
    loss: torch.Tensor  # () the OCAE's terms of the objective, weighted
    terms: dict[str, torch.Tensor]  # each term, unweighted, for the log
    prior: torch.Tensor  # (B, K) object presences a_k
    posterior: torch.Tensor  # (B, K) posterior presences: the part mass each capsule explains / M


class OCAE(nn.Module):
    def __init__(self, d_in: int, n_parts: int, cfg: OCAEConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = SetTransformer(d_in, cfg)
        self.decoder = ObjectCapsules(n_parts, cfg)

    def forward(self, inputs: torch.Tensor, poses: torch.Tensor, presence: torch.Tensor,
                gen: torch.Generator | None = None) -> OCAEOutput:
        """inputs (B, M, D): what the encoder sees of each part; poses (B, M, 6) the targets;
        presence (B, M) the part presences (they mask attention and weight the likelihood)."""
        cfg = self.cfg
        votes = self.decoder(self.encoder(inputs, presence), gen)
        joint = capsule_log_terms(votes, poses)  # (B, M, K+1)
        ll = capsule_log_likelihood(joint, presence).mean()
        mass = part_posterior(joint).sum(1) / poses.shape[1]  # (B, K)
        post_within, post_between = posterior_sparsity(mass)
        prior_within, prior_between = prior_sparsity(votes.object_presence, cfg.n_classes)
        loss = (-cfg.w_caps_ll * ll + cfg.w_dynamic_l2 * votes.dynamic_l2
                + cfg.w_posterior_within * post_within - cfg.w_posterior_between * post_between
                + cfg.w_prior_within * prior_within + cfg.w_prior_between * prior_between)
        terms = {"caps_ll": ll, "dynamic_l2": votes.dynamic_l2, "post_within": post_within,
                 "post_between": post_between, "prior_within": prior_within,
                 "prior_between": prior_between}
        return OCAEOutput(log_likelihood=ll, loss=loss, terms=terms,
                          prior=votes.object_presence, posterior=mass)
