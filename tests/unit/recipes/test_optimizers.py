"""LARS and LAMB steps against the papers' formulas computed by hand in numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scalescope.recipes import LAMB, LARS

RNG = np.random.default_rng(0)
WEIGHT = RNG.normal(size=(4, 3))
BIAS = RNG.normal(size=3)
GRADS = [(RNG.normal(size=(4, 3)), RNG.normal(size=3)) for _ in range(3)]


def run(make, steps=3):
    """Parameters after torch steps with the fixed gradients; the bias group not adapted."""
    w = torch.nn.Parameter(torch.tensor(WEIGHT))
    b = torch.nn.Parameter(torch.tensor(BIAS))
    optimizer = make([{"params": [w]}, {"params": [b], "weight_decay": 0.0, "adapt": False}])
    for gw, gb in GRADS[:steps]:
        w.grad, b.grad = torch.tensor(gw), torch.tensor(gb)
        optimizer.step()
    return w.detach().numpy(), b.detach().numpy()


def lars_reference(lr, momentum, decay, eta):
    """You, Gitman and Ginsburg 2017, Algorithm 1, per layer; the bias takes momentum SGD."""
    w, b = WEIGHT.copy(), BIAS.copy()
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    for gw, gb in GRADS:
        local = eta * np.linalg.norm(w) / (np.linalg.norm(gw) + decay * np.linalg.norm(w))
        vw = momentum * vw + lr * local * (gw + decay * w)
        vb = momentum * vb + lr * gb
        w, b = w - vw, b - vb
    return w, b


def lamb_reference(lr, beta1, beta2, eps, decay):
    """You et al. 2019 (LAMB), Algorithm 2 with φ the identity; the bias takes Adam steps."""
    w, b = WEIGHT.copy(), BIAS.copy()
    m = [np.zeros_like(w), np.zeros_like(b)]
    v = [np.zeros_like(w), np.zeros_like(b)]
    for t, grads in enumerate(GRADS, start=1):
        new = []
        for i, (p, g) in enumerate(zip((w, b), grads, strict=True)):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            r = (m[i] / (1 - beta1**t)) / (np.sqrt(v[i] / (1 - beta2**t)) + eps)
            if i == 0:
                u = r + decay * p
                new.append(p - lr * np.linalg.norm(p) / np.linalg.norm(u) * u)
            else:
                new.append(p - lr * r)
        w, b = new
    return w, b


@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_lars_matches_algorithm_1(decay):
    got = run(lambda groups: LARS(groups, lr=2.0, momentum=0.9, weight_decay=decay,
                                  trust_coefficient=0.02))  # fmt: skip
    want = lars_reference(2.0, 0.9, decay, 0.02)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10)
    assert not np.allclose(got[0], WEIGHT)


@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_lamb_matches_algorithm_2(decay):
    got = run(lambda groups: LAMB(groups, lr=0.01, betas=(0.9, 0.99), eps=1e-6,
                                  weight_decay=decay))  # fmt: skip
    want = lamb_reference(0.01, 0.9, 0.99, 1e-6, decay)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10)


def test_zero_weights_take_an_unscaled_step():
    w = torch.nn.Parameter(torch.zeros(3, 2, dtype=torch.float64))
    optimizer = LARS([w], lr=0.5, momentum=0.0, trust_coefficient=0.001)
    w.grad = torch.ones(3, 2, dtype=torch.float64)
    optimizer.step()
    np.testing.assert_allclose(w.detach().numpy(), -0.5)


def test_lars_is_the_packages_and_checks_adapt():
    import pytorch_optimizer

    w = torch.nn.Parameter(torch.ones(2, 2))
    assert isinstance(LARS([w], lr=0.1), pytorch_optimizer.LARS)
    with pytest.raises(ValueError, match="adapt=False group may hold only 1-D"):
        LARS([{"params": [w], "adapt": False}], lr=0.1)


def test_bad_options():
    w = [torch.nn.Parameter(torch.ones(2))]
    with pytest.raises(ValueError, match="lr > 0"):
        LARS(w, lr=0.0)
    with pytest.raises(ValueError, match="betas must be below 1"):
        LAMB(w, lr=0.1, betas=(0.9, 1.0))
