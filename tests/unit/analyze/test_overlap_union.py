"""Per slot: the union of B intervals and its part under union A, from merged unions and
cumulative lengths, against a plain per-slot computation on a grid of nanoseconds."""

from __future__ import annotations

import numpy as np
import pytest

from scalescope.analyze.steps.step_slots import _covered, _covered_by_sweep


def intervals(rng: np.random.Generator, n: int, slots: int, base: np.ndarray):
    slot = rng.integers(0, slots, n)
    start = base[slot] + rng.integers(0, 200, n)
    return slot, (start, start + rng.integers(0, 60, n))


def plain(slot_a, a, slot_b, b, base, n) -> tuple[np.ndarray, np.ndarray]:
    in_b, both = np.zeros(n), np.zeros(n)
    for s in range(n):
        grid_a, grid_b = np.zeros(300, bool), np.zeros(300, bool)
        for lo, hi in zip(a[0][slot_a == s] - base[s], a[1][slot_a == s] - base[s], strict=True):
            grid_a[lo:hi] = True
        for lo, hi in zip(b[0][slot_b == s] - base[s], b[1][slot_b == s] - base[s], strict=True):
            grid_b[lo:hi] = True
        in_b[s], both[s] = grid_b.sum(), (grid_a & grid_b).sum()
    return in_b, both


@pytest.mark.parametrize("far", [False, True], ids=["one key", "sweep"])
def test_union_and_overlap_per_slot_match_a_grid(far: bool) -> None:
    """Slots with overlapping, touching, empty and no intervals; each slot on a clock far
    from the others (hosts' uptimes), and, when a slot's times are too far apart for one
    key, the sweep."""
    rng = np.random.default_rng(5)
    n = 40
    base = rng.integers(0, 10**15, n)
    slot_a, a = intervals(rng, 60, n - 3, base)
    slot_b, b = intervals(rng, 150, n - 3, base)
    want = plain(slot_a, a, slot_b, b, base, n)
    if far:  # one interval 2^61 ns long: no key holds it
        b[1][0] = b[0][0] + 2**61
        want = _covered_by_sweep(slot_a, a, slot_b, b, n)
    got = _covered(slot_a, a, slot_b, b, n)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_no_backward_intervals_leave_nothing_under_them() -> None:
    slot_b, b = np.array([0, 0, 2]), (np.array([5, 8, 1]), np.array([10, 12, 4]))
    in_b, both = _covered(np.zeros(0, int), (np.zeros(0, int), np.zeros(0, int)), slot_b, b, 3)
    assert in_b.tolist() == [7.0, 0.0, 3.0] and both.tolist() == [0.0, 0.0, 0.0]
