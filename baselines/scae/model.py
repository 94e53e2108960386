"""SCAE (PCAE + OCAE, trained together) and FlowSCAE (an OCAE on given part capsules).

Letters: B batch, M parts, F special (or part) features, T template side, K object capsules,
H = W image side.

SCAE's objective (official code): - image log-likelihood - part-pose log-likelihood + the
OCAE's regularisers. The OCAE sees each part's pose and presence with the gradient stopped
(so it cannot bend the parts to suit itself), its special features with the gradient kept,
and its template (stopped); it explains the stopped poses.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from baselines.scae import pcae
from baselines.scae.config import SCAEConfig
from baselines.scae.ocae import OCAE, OCAEOutput


@dataclass
class Inference:
    """What the benchmark reads of a batch (no gradients, no noise)."""

    masks: torch.Tensor  # (B, M, H, W) presence_m * alpha_m(u): amodal part masks in [0, 1]
    visible: torch.Tensor  # (B, M, H, W) pixel responsibilities of the parts
    templates: torch.Tensor  # (B, M, H, W) placed template intensity * alpha, for figures
    reconstruction: torch.Tensor  # (B, 3, H, W) the mixture's mean image
    prior: torch.Tensor  # (B, K) object presences
    posterior: torch.Tensor  # (B, K) posterior object presences (SCAE's clustering features)


def to_images(batch: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float (B, 3, H, W) in [0, 1]."""
    return batch.permute(0, 3, 1, 2).float() / 255.0


class SCAE(nn.Module):
    def __init__(self, cfg: SCAEConfig):
        super().__init__()
        self.cfg = cfg
        p = cfg.pcae
        self.encoder = pcae.PartEncoder(p)
        self.decoder = pcae.TemplateDecoder(p, seed=cfg.loop.seed)
        d_in = 6 + 1 + p.n_special + p.template_size ** 2  # pose, 1 - presence, features, template
        self.ocae = OCAE(d_in, p.n_parts, cfg.ocae)

    def _forward(self, images: torch.Tensor, gen: torch.Generator | None):
        parts = self.encoder(images, gen)
        rendered = self.decoder.render(parts)
        joint = pcae.mixture_log_terms(images, rendered, parts.presence, parts.background,
                                       self.decoder.bg_logit,
                                       self.cfg.pcae.pixel_std)  # (B, M+1, H, W)
        b, m = parts.presence.shape
        pose = parts.pose.flatten(-2).detach()  # (B, M, 6)
        presence = parts.presence.detach()  # (B, M)
        template = self.decoder.alphas().flatten(1).detach()[None].expand(b, -1, -1)  # (B, M, T*T)
        inputs = torch.cat([pose, 1 - presence[..., None], parts.features, template], -1)
        out = self.ocae(inputs, pose, presence, gen)
        return parts, rendered, joint, out

    def loss(self, batch: torch.Tensor, gen: torch.Generator | None = None
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """batch uint8 (B, H, W, 3) -> (objective, its terms)."""
        parts, _, joint, out = self._forward(to_images(batch), gen)
        rec_ll = pcae.image_log_likelihood(joint).mean()
        terms = {"rec_ll": rec_ll, **out.terms, "presence": parts.presence.mean()}
        return -rec_ll + out.loss, terms

    @torch.no_grad()
    def infer(self, images: torch.Tensor) -> Inference:
        """images (B, 3, H, W) float in [0, 1]."""
        parts, rendered, joint, out = self._forward(images, None)
        m = parts.presence.shape[1]
        resp = pcae.responsibilities(joint)  # (B, M+1, H, W)
        intensity = rendered.colour.mean(2)  # (B, M, H, W)
        recon = pcae.mixture_mean(rendered, parts.presence, parts.background,
                                  self.decoder.bg_logit)
        return Inference(masks=parts.presence[:, :, None, None] * rendered.alpha,
                         visible=resp[:, :m], templates=(intensity * rendered.alpha).clamp(0, 1),
                         reconstruction=recon.clamp(0, 1), prior=out.prior,
                         posterior=out.posterior)


class FlowSCAE(nn.Module):
    """An OCAE on part capsules given as (B, M, 6 + 1 + F): pose (row-major 2x3), presence,
    features. A one-hot of the part index stands in for SCAE's per-part template: both tell
    the permutation-invariant encoder which part is which."""

    def __init__(self, cfg: SCAEConfig):
        super().__init__()
        self.cfg = cfg
        m, f = cfg.parts.n_parts, cfg.parts.n_features
        self.ocae = OCAE(6 + 1 + f + m, m, cfg.ocae)
        self.register_buffer("identity", torch.eye(m), persistent=False)

    def _forward(self, parts: torch.Tensor, gen: torch.Generator | None) -> OCAEOutput:
        b, m = parts.shape[:2]
        pose, presence, feats = parts[..., :6], parts[..., 6], parts[..., 7:]
        inputs = torch.cat([pose, 1 - presence[..., None], feats,
                            self.identity[None].expand(b, -1, -1)], -1)  # (B, M, D)
        return self.ocae(inputs, pose, presence, gen)

    def loss(self, batch: torch.Tensor, gen: torch.Generator | None = None
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        out = self._forward(batch.float(), gen)
        return out.loss, out.terms

    @torch.no_grad()
    def infer(self, parts: torch.Tensor) -> OCAEOutput:
        return self._forward(parts.float(), None)


def build(cfg: SCAEConfig) -> nn.Module:
    """The model a config describes, its weights drawn from cfg.loop.seed (the global RNG is
    left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.loop.seed)
        return SCAE(cfg) if cfg.kind == "scae" else FlowSCAE(cfg)
