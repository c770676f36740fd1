"""Sharded data parallelism: FSDP's all-gathers, unit sizes, and memory advice that fits."""

from __future__ import annotations

import pytest
from diagnose_inputs import GIB, analysis, good_ranks, make_input, rank_steps

from scalescope.analyze.comm.collectives import CollectiveAnalysis, TagPerStep
from scalescope.analyze.steps.steps import MemoryPeak
from scalescope.diagnose import diagnose
from scalescope.diagnose.rules_compute import MemoryRule
from scalescope.diagnose.rules_fsdp import FsdpGatherRule, FsdpSmallUnitsRule
from scalescope.diagnose.rules_job import ReplicasRule

STEP = dict(forward=30.0, backward=50.0, optimizer=5.0)


def sharded(
    unit_bytes: float, units: int, gather_ms: float, reduce_ms: float, **kw
) -> CollectiveAnalysis:
    """``units`` blocks and a root, each gathered twice and reduced once per step."""
    per_step = []
    for name in [f"layers.{i}" for i in range(units)] + ["root"]:
        per_step.append(TagPerStep(f"unshard:{name}", 2, 2 * unit_bytes, 2.0, gather_ms))
        per_step.append(TagPerStep(f"reduce_grads:{name}", 2, unit_bytes, 1.0, reduce_ms))
    return CollectiveAnalysis(2, 2, 40, 0, (), (), tuple(per_step), ())


def ctx(coll: CollectiveAnalysis, memory: tuple = ()) -> object:
    ranks = [rank_steps(r, memory=memory, **STEP) for r in (0, 1)]
    return make_input(analysis(ranks, collectives=coll), ranks=good_ranks())


def test_exposed_all_gathers_get_prefetch_and_no_reshard_for_the_last_units() -> None:
    f = FsdpGatherRule().evaluate(ctx(sharded(8e6, 4, gather_ms=4.0, reduce_ms=1.0)))
    assert f is not None and f.code == "FSDP_EXPOSED_GATHER"
    assert f.share_pct == pytest.approx(20.0), "5 units x 4 ms of a 100 ms step"
    assert "set_modules_to_forward_prefetch" in f.remedies[0]
    assert "reshard_after_forward=False" in f.remedies[1]
    assert "layers.2, layers.3" in f.remedies[1] and "saves 2 all-gathers" in f.remedies[1]


def test_all_gathers_below_the_threshold_are_no_finding() -> None:
    assert FsdpGatherRule().evaluate(ctx(sharded(8e6, 4, gather_ms=1.0, reduce_ms=1.0))) is None


def test_on_a_gpu_the_exposed_gather_is_not_judged() -> None:
    c = ctx(sharded(8e6, 4, 4.0, 1.0), memory=(MemoryPeak("cuda_max_allocated", GIB),))
    assert FsdpGatherRule().evaluate(c) is None
    assert "own stream" in FsdpGatherRule().not_judged(c)[0]


def test_many_small_units_are_told_to_wrap_bigger_blocks() -> None:
    f = FsdpSmallUnitsRule().evaluate(ctx(sharded(64 * 1024, 6, gather_ms=1.0, reduce_ms=1.0)))
    assert f is not None and f.code == "FSDP_SMALL_UNITS"
    assert f.share_pct == pytest.approx(14.0), "7 units x (1 ms gathering + 1 ms reducing)"
    assert "7 FSDP units of 64.0 KiB" in f.summary and "wrap bigger blocks" in f.remedies[0]


def test_large_units_or_few_small_ones_are_no_finding() -> None:
    assert FsdpSmallUnitsRule().evaluate(ctx(sharded(8e6, 6, 1.0, 1.0))) is None
    assert FsdpSmallUnitsRule().evaluate(ctx(sharded(64 * 1024, 2, 1.0, 1.0))) is None


def test_a_sharded_run_is_never_independent_replicas() -> None:
    c = ctx(sharded(8e6, 4, 1.0, 1.0))
    assert ReplicasRule().evaluate(c) is None
    assert all(f.code != "INDEPENDENT_REPLICAS" for f in diagnose(c).findings)


@pytest.mark.parametrize(("coll", "first", "last"), [
    (sharded(8e6, 4, 1.0, 1.0), "smaller batch", "offload_policy"),
    (None, "fully_shard", "fewer ranks"),
])  # fmt: skip
def test_memory_advice_fits_sharding(coll, first: str, last: str) -> None:
    mem = (MemoryPeak("rss_peak", 28 * GIB),)
    f = MemoryRule().evaluate(ctx(coll, memory=mem))
    assert f is not None
    assert first in f.remedies[0].lower() or first in f.remedies[0]
    assert last in f.remedies[-1]
