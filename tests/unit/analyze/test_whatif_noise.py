"""Noise apart from cause in the what-if: only ranks and nodes slower than their peers beyond
the steps' spread (analyze/model/peers.py) are candidates and are paced in the ideal; the
ranks' jitter is its own line, never a rank's gain."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from recorded_runs import RUNS
from test_whatif import MS, NODES, grid, ring

from scalescope.analyze.model.causes import candidate_causes
from scalescope.analyze.model.pacing import at_own_median, typical_transfers
from scalescope.analyze.model.replay import predict
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.model.whatif import what_if, what_if_of
from scalescope.events import load_run


def noisy(ranks: int, steps: int = 12, sd_ms: float = 3.0, seed: int = 0) -> StepGrid:
    """Replicas of 20 ms of work before one collective, each step's work jittered per rank."""
    g = grid([[20.0]] * ranks, steps=steps)
    jitter = np.random.default_rng(seed).normal(0.0, sd_ms * MS, (steps, ranks, 1))
    return replace(g, work_ns=np.maximum(g.work_ns + jitter, 0.0))


def slower(g: StepGrid, rank: int, ms: float) -> StepGrid:
    work = g.work_ns.copy()
    work[:, rank] += ms * MS
    return replace(g, work_ns=work)


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_jitter_alone_names_no_rank_and_leaves_the_ideal_at_the_measured_step(ranks):
    w = what_if_of(noisy(ranks), [], {}, warmup_steps=0)
    assert not [f.cause for f in w.fixes if "rank:" in f.cause]
    assert w.beyond_spread == ()
    assert w.slowdown == pytest.approx(1.0)
    assert w.jitter_ms is not None and w.jitter_ms > 0.5  # the max of noisy ranks
    assert w.jitter_ms == pytest.approx(w.replayed.mean_ms - w.steady.mean_ms)


def test_a_slow_rank_is_the_cause_and_its_excess_is_no_jitter():
    w = what_if_of(slower(noisy(4), 2, 8.0), [], {}, warmup_steps=0)
    assert w.beyond_spread == ("rank:2",)
    assert {c for f in w.fixes for c in f.cause.split("+") if c.startswith("rank:")} == {"rank:2"}
    assert w.best is not None and w.best.cause.startswith("rank:2")
    assert w.best.gain_ms > 5.0
    assert w.slowdown is not None and w.slowdown > 1.2
    assert w.jitter_ms is not None and w.jitter_ms < 4.0


def test_a_slow_node_is_a_candidate_and_a_noisy_one_is_not():
    hosts = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assert "node:b" in candidate_causes(slower(slower(noisy(6), 2, 6.0), 3, 6.0), hosts)
    assert not [c for c in candidate_causes(noisy(6), hosts) if c.startswith(("node", "rank"))]


def test_each_rank_at_its_own_median_step_and_the_slow_ones_as_measured():
    g = noisy(3, steps=5)
    steady = at_own_median(g, keep=np.array([False, False, True]))
    median = np.broadcast_to(np.median(g.work_ns[:, :2], axis=0), (5, 2, 1))
    np.testing.assert_allclose(steady.work_ns[:, :2], median)
    np.testing.assert_array_equal(steady.work_ns[:, 2], g.work_ns[:, 2])
    even = at_own_median(g, rows=np.arange(4))
    np.testing.assert_allclose(even.work_ns[0], np.median(g.work_ns[:4], axis=0))
    assert predict(steady, "s").low_ms <= predict(g, "m").high_ms


def test_the_recorded_balanced_run_credits_no_rank():
    """The no-fault run's what-if said rank:0 +8.2 % and S = 1.14: a copy of the other rank."""
    w = what_if(load_run(RUNS / "balanced" / "run"))
    assert w is not None and w.beyond_spread == ()
    assert not [f.cause for f in w.fixes if "rank:" in f.cause]
    assert w.slowdown is not None and w.slowdown < 1.01
    assert w.jitter_ms is not None and w.jitter_ms > 0


@pytest.mark.parametrize("name", ["straggler_forward_2", "straggler_shared_core"])
def test_a_recorded_straggler_stays_the_cause(name):
    w = what_if(load_run(RUNS / name / "run"))
    assert w is not None and "rank:1" in w.beyond_spread
    assert w.best is not None and w.best.cause.startswith("rank:1")
    assert w.slowdown is not None and w.slowdown > 1.5


def test_a_links_groups_are_paced_only_beyond_their_spread():
    """Three groups of one class trading places from step to step: none is a slow link; one
    slower in every step is."""
    base = ring([2.0, 2.0, 2.0])
    noise = np.array([[3.0, 1.0, 2.0], [1.0, 3.0, 2.0], [2.0, 1.0, 3.0], [1.0, 2.0, 3.0]])
    group = np.array([[0, 2], [1, 0], [2, 1]])
    trading = replace(base, transfer_ns=noise[:, group] * MS)
    np.testing.assert_array_equal(typical_transfers(trading, NODES), trading.transfer_ns)
    slow = replace(trading, transfer_ns=(noise + [10.0, 0.0, 0.0])[:, group] * MS)
    assert (typical_transfers(slow, NODES)[:, 0, 0] < slow.transfer_ns[:, 0, 0]).all()
