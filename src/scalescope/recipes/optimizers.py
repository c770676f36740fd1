"""LARS and LAMB, the layer-wise adaptive optimizers of large-batch training.

Each tensor of parameters is a "layer": its step is scaled by a trust ratio
||w|| / ||update||; biases and normalisation weights (one-dimensional tensors) skip it.

``LARS`` is ``pytorch_optimizer.LARS`` (pytorch-optimizer, a maintained package), with only
the constructor adapted to this API: it keeps the ``adapt`` group flag and checks it. The
package decides per tensor: tensors of two or more dimensions take the trust ratio and the
weight decay, one-dimensional ones take plain momentum SGD without decay; a group with
``adapt=False`` may therefore hold only one-dimensional tensors. Two differences from the
hand-written version this replaced: the package applies the rate after the momentum
(``v ← m v + λ (g + β w)``, ``w ← w − lr v``, as torch.optim.SGD does) where the paper's
Algorithm 1 puts it inside (``v ← m v + lr λ (g + β w)``, ``w ← w − v``), which is the same
step while the rate is constant and differs while a schedule changes it (warmup, decay);
and the step overwrites each ``p.grad`` with the update (zero gradients before the next
backward pass, as usual).

``LAMB`` is written here against ``torch.optim.Optimizer``, because
``pytorch_optimizer.Lamb`` does not compute the paper's Algorithm 2 under any of its
options: it never bias-corrects the second moment, so a group kept out of the trust ratio
(its ``adam=True``) takes Adam steps 1/√(1 − β₂ᵗ) too large (≈32× on step 1 with
β₂ = 0.999, still 3× at step 100), and with weight decay the balance of r against λw in the
trust ratio shifts; it applies the first-moment correction 1/(1 − β₁ᵗ) to the step after
the trust ratio, so adapted layers move lr‖w‖/(1 − β₁ᵗ) instead of lr‖w‖ (10× on step 1;
``adam_debias=True`` drops it, but then m stays uncorrected); and it clamps ‖w‖ at 10 in
the trust ratio. Against the hand-computed reference step it is off by 93% (adam_debias) to
16× (default) on the non-adapted group. Here a parameter group with ``adapt=False``
(biases and normalisation weights, by the usual practice) skips the trust ratio, so it
takes plain Adam steps; give it ``weight_decay=0`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytorch_optimizer
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


class LARS(pytorch_optimizer.LARS):
    """Layer-wise Adaptive Rate Scaling (You, Gitman and Ginsburg 2017, Algorithm 1), from
    pytorch-optimizer.

    Per tensor ``w`` of two or more dimensions with gradient ``g``: local rate
    ``λ = η ||w|| / (||g|| + β ||w||)`` (η ``trust_coefficient``, β ``weight_decay``; 1 when
    a norm is zero); ``v ← m v + λ (g + β w)``; ``w ← w − lr v``. One-dimensional tensors:
    ``v ← m v + g``; ``w ← w − lr v``. ``adapt=False`` groups must hold only those.
    """

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.9,
                 weight_decay: float = 0.0, trust_coefficient: float = 0.001,
                 adapt: bool = True) -> None:  # fmt: skip
        _check(lr, weight_decay, momentum=momentum, trust_coefficient=trust_coefficient)
        self._adapt = adapt
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                         trust_coefficient=trust_coefficient)  # fmt: skip

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        param_group.setdefault("adapt", self._adapt)
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        if not group["adapt"] and any(p.ndim > 1 for p in group["params"]):
            raise ValueError(
                "LARS (pytorch-optimizer) adapts every tensor of two or more dimensions: "
                "an adapt=False group may hold only 1-D tensors"
            )


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
