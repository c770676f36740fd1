"""LARS and LAMB, the layer-wise adaptive optimizers of large-batch training.

Written against ``torch.optim.Optimizer`` (no maintained package on the project's allowed
list provides them; torch has neither). Each tensor of parameters is a "layer": its step is
scaled by a trust ratio ||w|| / ||update||. A parameter group with ``adapt=False`` (biases
and normalisation weights, by the usual practice) skips the trust ratio, so it takes plain
momentum SGD (LARS) or Adam (LAMB) steps; give it ``weight_decay=0`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim import Optimizer


def _trust_ratio(
    weight_norm: torch.Tensor, update_norm: torch.Tensor, coefficient: float = 1.0
) -> torch.Tensor:
    """coefficient * weight_norm / update_norm, or 1 when either norm is zero (a fresh
    layer, or one without gradient), as the reference implementations do."""
    ok = (weight_norm > 0) & (update_norm > 0)
    ratio = coefficient * weight_norm / update_norm.clamp_min(1e-30)
    return torch.where(ok, ratio, torch.ones_like(weight_norm))


def _check(lr: float, weight_decay: float, **others: float) -> None:
    if lr <= 0 or weight_decay < 0 or any(v < 0 for v in others.values()):
        raise ValueError(f"LARS/LAMB need lr > 0 and non-negative options, got lr={lr}, "
                         f"weight_decay={weight_decay}, {others}")  # fmt: skip


class LARS(Optimizer):
    """Layer-wise Adaptive Rate Scaling (You, Gitman and Ginsburg 2017, Algorithm 1).

    Per tensor ``w`` with gradient ``g``: local rate ``λ = η ||w|| / (||g|| + β ||w||)``
    (η ``trust_coefficient``, β ``weight_decay``; 1 when a norm is zero);
    ``v ← m v + lr λ (g + β w)``; ``w ← w − v``.
    """

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.9,
                 weight_decay: float = 0.0, trust_coefficient: float = 0.001,
                 adapt: bool = True) -> None:  # fmt: skip
        _check(lr, weight_decay, momentum=momentum, trust_coefficient=trust_coefficient)
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                        trust_coefficient=trust_coefficient, adapt=adapt)  # fmt: skip
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            decay, eta = group["weight_decay"], group["trust_coefficient"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                g = w.grad
                update = g.add(w, alpha=decay) if decay else g.clone()
                if group["adapt"]:
                    w_norm = torch.linalg.vector_norm(w)
                    denominator = torch.linalg.vector_norm(g) + decay * w_norm
                    update.mul_(_trust_ratio(w_norm, denominator, eta))
                state = self.state[w]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(w)
                v = state["momentum_buffer"]
                v.mul_(group["momentum"]).add_(update, alpha=group["lr"])
                w.sub_(v)
        return loss


class LAMB(Optimizer):
    """Layer-wise Adaptive Moments for Batch training (You et al. 2019, Algorithm 2).

    Adam's bias-corrected moments give ``r = m̂ / (√v̂ + ε)``; with ``u = r + λ w``
    (λ ``weight_decay``) the step is ``w ← w − lr (||w|| / ||u||) u``.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0, adapt: bool = True) -> None:  # fmt: skip
        _check(lr, weight_decay, eps=eps, beta1=betas[0], beta2=betas[1])
        if not (betas[0] < 1 and betas[1] < 1):
            raise ValueError(f"LAMB betas must be below 1, got {betas}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adapt=adapt)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                state = self.state[w]
                if not state:
                    state.update(step=0, m=torch.zeros_like(w), v=torch.zeros_like(w))
                state["step"] += 1
                t, m, v = state["step"], state["m"], state["v"]
                m.mul_(beta1).add_(w.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(w.grad, w.grad, value=1 - beta2)
                m_hat = m / (1 - beta1**t)
                v_hat = v / (1 - beta2**t)
                u = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"]:
                    u.add_(w, alpha=group["weight_decay"])
                if group["adapt"]:
                    ratio = _trust_ratio(torch.linalg.vector_norm(w), torch.linalg.vector_norm(u))
                    u.mul_(ratio)
                w.sub_(u, alpha=group["lr"])
        return loss
