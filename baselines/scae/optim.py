"""RMSProp as TensorFlow 1 defines it (tf.train.RMSPropOptimizer, the optimiser SCAE trains with).

It differs from torch.optim.RMSprop in three ways that matter for SCAE's small epsilon
(1e-2 / batch_size ** 2): the mean square starts at ones (torch: zeros, so torch's first
steps are about 1 / sqrt(1 - rho) ~ 3x larger), epsilon sits inside the square root, and the
learning rate is applied before the momentum accumulation (the same when lr is constant).
Update (tf.raw_ops.ApplyRMSProp):

    ms  <- rho * ms + (1 - rho) * g^2          (ms starts at 1)
    mom <- momentum * mom + lr * g / sqrt(ms + eps)   (mom starts at 0)
    var <- var - mom
"""
from __future__ import annotations

import torch


class RMSPropTF(torch.optim.Optimizer):
    """TF1's RMSProp (not centred); see the module docstring for the update."""

    def __init__(self, params, lr: float, decay: float = 0.9, momentum: float = 0.0,
                 eps: float = 1e-10):
        if lr <= 0 or not 0.0 <= decay < 1.0 or momentum < 0 or eps < 0:
            raise ValueError(f"bad RMSProp settings lr={lr} decay={decay} momentum={momentum} "
                             f"eps={eps}")
        super().__init__(params, dict(lr=lr, decay=decay, momentum=momentum, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, rho, mu, eps = group["lr"], group["decay"], group["momentum"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                state = self.state[p]
                if not state:
                    state["ms"] = torch.ones_like(p)  # TF1's slot initialiser: ones
                    state["mom"] = torch.zeros_like(p)
                ms, mom = state["ms"], state["mom"]
                ms.mul_(rho).addcmul_(g, g, value=1.0 - rho)
                mom.mul_(mu).addcdiv_(g, (ms + eps).sqrt(), value=lr)
                p.sub_(mom)
        return loss


def build(params, name: str, lr: float, decay: float, momentum: float, eps: float):
    """The optimiser a config names: "rmsprop_tf" (SCAE's) or "adam"."""
    if name == "rmsprop_tf":
        return RMSPropTF(params, lr=lr, decay=decay, momentum=momentum, eps=eps)
    return torch.optim.Adam(params, lr=lr)
