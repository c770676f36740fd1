"""Noise apart from cause: which ranks (or nodes) are slower than their peers beyond the
peers' step-to-step spread. Each one's time in a step is paired with its median peer's in the
same step; a one-sided paired t-test on those differences, Holm-corrected across the ranks
at ``ALPHA``, and a mean excess of at least ``MIN_EFFECT`` of the step. A rank that is only
sometimes the slower one, as every rank is among noisy replicas, passes neither.

The t-test, not a sign or signed-rank test: with 5 measured steps those can never reach
p < 0.01 (their smallest p is 1/32), and a 5-step run with a rank twice as slow in every step
is a cause. A one-off stall widens the differences' spread, so it does not pass either.

Nor does a stall that recurs: rank 1 stalling 152 ms at steps 9, 19 and 29 of 26 measured
steps gave t ~1.8 (its three spikes are the spread). A rank also passes when its excess
``bursts``: at least ``BURST_MIN`` steps, evenly spaced, each standing out of its own
differences (over 8 median absolute deviations and a quarter of a step,
``extra_work.stands_out``), with the minimum mean excess. Noise spikes come neither that far
out nor at a period."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.steps.extra_work import period_of, stands_out

ALPHA = 0.01
"""The family-wise error rate over the ranks tested: one run in a hundred of replicas with
no cause names one."""
MIN_EFFECT = 0.02
"""The smallest mean excess over the median peer that is a cause, as a share of the step."""
BURST_MIN = 3
"""The fewest evenly spaced steps standing out that make a rank's lateness a cause."""


@dataclass(frozen=True)
class PeerTest:
    """Per rank (or node), in the order of the matrix's columns."""

    excess_ns: np.ndarray
    """The mean over steps of its time minus its median peer's, step by step."""
    p: np.ndarray
    """The one-sided p-value that it is no slower than its median peer."""
    slower: np.ndarray
    """bool: slower beyond the peers' spread (Holm at ``ALPHA``, or in ``bursts``) by at
    least the minimum."""
    bursts: np.ndarray
    """bool: late by far at evenly spaced steps (``bursts``)."""


def median_peer(total: np.ndarray) -> np.ndarray:
    """(steps, ranks) -> for each rank, the rank among the others whose ``total`` is their
    median (the lower one of an even count), step by step. With two ranks, the other: a
    median that counted the slow rank would be half of it."""
    n = total.shape[1]
    order = np.argsort(total, axis=1, kind="stable")
    place = np.empty_like(order)
    np.put_along_axis(place, order, np.broadcast_to(np.arange(n), order.shape), axis=1)
    middle = (n - 2) // 2
    return np.take_along_axis(order, np.where(middle < place, middle, middle + 1), axis=1)


def slower_than_peers(
    total: np.ndarray, step_ns: float, alpha: float = ALPHA, min_effect: float = MIN_EFFECT,
    steps: np.ndarray | None = None,
) -> PeerTest:  # fmt: skip
    """(steps, ranks) of each rank's time in each step -> which ranks are slower than their
    median peer beyond the step-to-step spread of the differences. ``step_ns``: the typical
    step the minimum effect is a share of; ``steps``: the rows' step numbers (default: in
    order, one apart), for the bursts' period. Fewer than 2 ranks or 2 steps: none is."""
    if total.ndim != 2:
        raise ValueError(f"peer test: (steps, ranks) expected, got shape {total.shape}")
    n_steps, n_ranks = total.shape
    if n_ranks < 2 or n_steps < 2:
        none = np.zeros(n_ranks, dtype=bool)
        return PeerTest(np.zeros(n_ranks), np.ones(n_ranks), none, none)
    diff = total - np.take_along_axis(total, median_peer(total), axis=1)
    excess = diff.mean(axis=0)
    sd = diff.std(axis=0, ddof=1)
    p = np.array([_t_above(m, s, n_steps) for m, s in zip(excess, sd, strict=True)])
    burst = bursts(diff, np.arange(n_steps) if steps is None else np.asarray(steps), step_ns)
    slower = (holm(p, alpha) | burst) & (excess >= min_effect * step_ns)
    return PeerTest(excess, p, slower, burst)


def bursts(diff: np.ndarray, steps: np.ndarray, step_ns: float) -> np.ndarray:
    """bool per column of ``diff`` (steps, ranks; each rank's time less its median peer's):
    at most half of its steps stand out (``stands_out``), more than twice as many as its
    median peer's, and its stalls, the steps standing out by at least half its longest, are
    ``BURST_MIN`` or more, evenly spaced by their numbers in ``steps``.

    Ranks that take turns at being the slowest each stand out as often: none is a cause. One
    noise spike of the other rank is no turn: ddp-periodic-stall's rank 0 stood out once
    (6 ms) beside rank 1's three 152 ms stalls (seed 4902). Nor is a spike of its own among
    its stalls, which the spacing is read without: rank 1 also stood out at step 20, 15 ms
    after its stall at 19 (seed 4903), and steps 9, 19, 20, 29 are not evenly spaced."""
    late = stands_out(diff, step_ns)
    count = late.sum(axis=0)
    out = np.zeros(diff.shape[1], dtype=bool)
    for col in np.flatnonzero((count >= BURST_MIN) & (count <= diff.shape[0] / 2)):
        peers = float(np.median(np.delete(count, col)))
        stalls = late[:, col] & (diff[:, col] >= diff[:, col].max() / 2)
        even = period_of(tuple(np.sort(steps[stalls]).tolist())) is not None
        out[col] = even and stalls.sum() >= BURST_MIN and count[col] > 2 * peers
    return out


def p_above_zero(x: np.ndarray) -> float:
    """The one-sided p-value that the values ``x`` are centred on zero, not above it
    (Student's t on their mean); 1 for fewer than 2 values."""
    if len(x) < 2:
        return 1.0
    return _t_above(float(np.mean(x)), float(np.std(x, ddof=1)), len(x))


def _t_above(mean: float, sd: float, n: int) -> float:
    """P(a mean this large | differences centred on zero), Student's t with n-1 degrees."""
    if sd <= 0:
        return 0.0 if mean > 0 else 1.0
    return t_upper(mean / (sd / math.sqrt(n)), n - 1)


def t_upper(t: float, df: int) -> float:
    """P(T >= t) for Student's t with ``df`` degrees of freedom, exactly (Abramowitz and
    Stegun 26.7.3-4: a finite series in cos of atan(t / sqrt(df)))."""
    if df < 1:
        raise ValueError(f"t distribution: degrees of freedom must be >= 1, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:
        term, total = math.cos(theta), 0.0
        for k in range(3, df + 1, 2):
            total += term
            term *= c2 * (k - 1) / k
        inside = 2 / math.pi * (theta + s * total) if df > 1 else 2 * theta / math.pi
    else:
        term, total = 1.0, 0.0
        for k in range(2, df + 1, 2):
            total += term
            term *= c2 * (k - 1) / k
        inside = s * total
    tail = max(0.0, (1 - inside) / 2)
    return tail if t >= 0 else 1 - tail


def holm(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down: the k-th smallest p is rejected against alpha / (m - k + 1), until
    the first that is not (bool per p, in the input's order)."""
    order = np.argsort(p, kind="stable")
    limits = alpha / (len(p) - np.arange(len(p)))
    passed = p[order] < limits
    keep = np.cumprod(passed).astype(bool)
    out = np.zeros(len(p), dtype=bool)
    out[order] = keep
    return out
