"""DeepSpeed ZeRO: parameter all-gathers (stage 3) and gradient exchanges (stages 1/2) that
take a large share of the step, on hand-built analyses."""

from __future__ import annotations

import msgspec
import pytest
from diagnose_inputs import GIB, analysis, good_ranks, make_input, rank_steps

from scalescope.analyze.comm.collectives import CollectiveAnalysis, TagPerStep
from scalescope.analyze.steps.steps import MemoryPeak
from scalescope.diagnose import diagnose
from scalescope.diagnose.rules_zero import Zero3GatherRule, Zero12CommRule

STEP = dict(forward=30.0, backward=50.0, optimizer=5.0)
PARAMS = 352_296


def zero(gather_ms: float, reduce_ms: float, gathers: float = 2.0) -> CollectiveAnalysis:
    per_step = (
        TagPerStep("zero_gather_params", 2, gathers * PARAMS, gathers, gather_ms),
        TagPerStep("zero_reduce_grads", 2, PARAMS, 1.0, reduce_ms),
        TagPerStep("zero_step", 2, 8.0, 1.0, 0.1),
    )
    return CollectiveAnalysis(2, 2, 40, 0, (), (), per_step, ())


def ctx(coll: CollectiveAnalysis, stage: int | None, hosts=("vm", "vm"), memory: tuple = ()):
    ranks = [rank_steps(r, memory=memory, **STEP) for r in (0, 1)]
    metas = {
        r: msgspec.structs.replace(m, zero_stage=stage, hostname=hosts[r])
        for r, m in good_ranks().items()
    }
    return make_input(analysis(ranks, collectives=coll), ranks=metas)


def test_zero3_gathers_above_the_threshold_say_what_to_change_with_their_cost() -> None:
    f = Zero3GatherRule().evaluate(ctx(zero(gather_ms=20.0, reduce_ms=2.0), stage=3))
    assert f is not None and f.code == "ZERO3_PARAM_GATHER"
    assert f.share_pct == pytest.approx(20.0), "20 ms of a 100 ms step"
    assert "20.0 ms per step" in f.summary
    text = " ".join(f.remedies)
    for key in ("stage3_prefetch_bucket_size", "overlap_comm", "contiguous_gradients"):
        assert key in text
    assert "stage: 2" in text
    assert "zero_hpz_partition_size" not in text, "one host: hpZ/MiCS do not apply"


def test_zero3_across_hosts_adds_hpz_and_mics() -> None:
    f = Zero3GatherRule().evaluate(ctx(zero(20.0, 2.0), stage=3, hosts=("a", "b")))
    assert f is not None
    assert "zero_hpz_partition_size" in f.remedies[-1] and "mics_shard_size" in f.remedies[-1]


def test_zero3_gathers_below_the_threshold_or_on_a_gpu_are_no_finding() -> None:
    assert Zero3GatherRule().evaluate(ctx(zero(5.0, 2.0), stage=3)) is None
    gpu = ctx(zero(20.0, 2.0), stage=3, memory=(MemoryPeak("cuda_max_allocated", GIB),))
    assert Zero3GatherRule().evaluate(gpu) is None
    assert "own stream" in Zero3GatherRule().not_judged(gpu)[0]


def test_zero2_exchange_names_overlap_and_the_bucket_sizes() -> None:
    c = ctx(zero(gather_ms=6.0, reduce_ms=9.0, gathers=1.0), stage=2)
    assert Zero3GatherRule().evaluate(c) is None
    f = Zero12CommRule().evaluate(c)
    assert f is not None and f.code == "ZERO_EXCHANGE"
    assert f.share_pct == pytest.approx(15.0), "6 ms gathering + 9 ms reducing of 100 ms"
    assert "ZeRO 2" in f.summary
    text = " ".join(f.remedies)
    for key in ("overlap_comm", "reduce_bucket_size", "allgather_bucket_size"):
        assert key in text


def test_without_a_deepspeed_engine_nothing_is_said() -> None:
    c = ctx(zero(20.0, 20.0), stage=None)
    assert Zero3GatherRule().evaluate(c) is None and Zero12CommRule().evaluate(c) is None


def test_a_zero_run_is_never_independent_replicas_and_gets_its_finding() -> None:
    codes = [f.code for f in diagnose(ctx(zero(20.0, 2.0), stage=3)).findings]
    assert "ZERO3_PARAM_GATHER" in codes and "INDEPENDENT_REPLICAS" not in codes
