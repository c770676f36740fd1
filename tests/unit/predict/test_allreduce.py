import math

import pytest

from scalescope.analyze.comm.alpha_beta import AlphaBetaFit
from scalescope.predict.allreduce import HopCost, allreduce_s, hop_from_fit, pick_fit

HOP = HopCost(alpha_s=5e-6, beta_s_per_byte=1e-9, source="test")


def fit(world: int, alpha: float = 40e-6, beta: float = 2e-9, op: str = "all_reduce"):
    return AlphaBetaFit(
        op=op, backend="gloo", world_size=world, alpha_s=alpha, beta_s_per_byte=beta,
        rel_err=0.01, num_points=8, min_bytes=8, max_bytes=1 << 26,
    )  # fmt: skip


def test_ring_by_hand():
    # 4 ranks: 6 steps of 5 us, and 6/4 of 8 MB at 1 GB/s
    assert allreduce_s(8e6, 4, HOP) == pytest.approx(6 * 5e-6 + 1.5 * 8e6 * 1e-9)
    assert allreduce_s(8e6, 1, HOP) == 0.0


def test_tree_by_hand():
    # 5 ranks: ceil(log2 5) = 3 levels up and down, the whole message each
    assert allreduce_s(1e3, 5, HOP, "tree") == pytest.approx(6 * (5e-6 + 1e3 * 1e-9))


def test_tree_beats_ring_on_small_messages_only():
    assert allreduce_s(64, 64, HOP, "tree") < allreduce_s(64, 64, HOP, "ring")
    assert allreduce_s(64e6, 64, HOP, "tree") > allreduce_s(64e6, 64, HOP, "ring")


@pytest.mark.parametrize("world", [2, 3, 8])
def test_hop_of_a_fit_reproduces_the_fit_at_its_world_size(world):
    f = fit(world)
    for nbytes in (8, 4096, 1 << 24):
        assert allreduce_s(nbytes, world, hop_from_fit(f)) == pytest.approx(f.time_s(nbytes))


def test_two_rank_fit_is_a_ring_of_two():
    hop = hop_from_fit(fit(2, alpha=40e-6, beta=2e-9))
    assert (hop.alpha_s, hop.beta_s_per_byte) == pytest.approx((20e-6, 2e-9))
    # at 8 ranks the bytes term grows to 2 * 7/8 of the message
    assert allreduce_s(1e6, 8, hop) == pytest.approx(14 * 20e-6 + 1.75 * 1e6 * 2e-9)


def test_bad_inputs():
    with pytest.raises(ValueError, match="ring or tree"):
        allreduce_s(1, 2, HOP, "butterfly")
    with pytest.raises(ValueError, match="ranks >= 1"):
        allreduce_s(1, 0, HOP)
    with pytest.raises(ValueError, match="cannot price a ring"):
        hop_from_fit(fit(1))
    with pytest.raises(ValueError, match="no allreduce fit"):
        pick_fit([fit(4, op="broadcast")])


def test_pick_fit_takes_the_largest_world():
    assert pick_fit([fit(2), fit(4, op="allreduce"), fit(8, op="broadcast")]).world_size == 4
    assert math.isfinite(hop_from_fit(pick_fit([fit(2)])).alpha_s)
