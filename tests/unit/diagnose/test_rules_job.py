"""HANG and INDEPENDENT_REPLICAS: the job's own findings, first whatever else fires."""

from __future__ import annotations

import msgspec
from diagnose_inputs import analysis, collectives, good_ranks, make_input, rank_steps

from scalescope.analyze.comm.collectives import CollectiveAnalysis, TagPerStep
from scalescope.analyze.watch.hang import HangReport, RankHang, verdicts
from scalescope.diagnose import diagnose

PARAMS = 4_000_000


def replicas_input(per_step: tuple[TagPerStep, ...], params: int | None = PARAMS):
    ranks = {r: msgspec.structs.replace(m, steps=20, optimizer_param_bytes=params)
             for r, m in good_ranks().items()}  # fmt: skip
    coll = CollectiveAnalysis(2, 2, 40, 0, (), (), per_step, ())
    steps = [rank_steps(r, 100.0, forward=30.0) for r in (0, 1)]
    return make_input(analysis(steps, collectives=coll), ranks=ranks)


def test_no_gradient_collective_is_independent_replicas_first():
    d = diagnose(replicas_input(()))
    first = d.findings[0]
    assert first.code == "INDEPENDENT_REPLICAS"
    assert first.summary.startswith("the ranks never synchronise gradients")
    assert "0 B of collectives per step for 3.8 MiB of parameters" in first.summary
    assert d.verdict.line.startswith("no data parallelism: the ranks never synchronise")


def test_gradients_all_reduced_by_hand_are_data_parallel():
    by_hand = (TagPerStep("user", 2, PARAMS * 0.9, 10),)
    codes = [f.code for f in diagnose(replicas_input(by_hand)).findings]
    assert "INDEPENDENT_REPLICAS" not in codes
    small = (TagPerStep("user", 2, 16, 1),)  # a loss all_reduce: not the gradients
    assert diagnose(replicas_input(small)).findings[0].code == "INDEPENDENT_REPLICAS"


def test_tensor_parallel_ranks_exchange_no_gradients_and_are_no_replicas():
    """A dp x tp mesh of dp 1 (the fault matrix's fsdp-tp case): the two ranks hold halves
    of one model, all-reduce activations and never gradients."""
    from scalescope.events.run import GroupMeta

    small = (TagPerStep("user", 2, 16, 1),)
    ctx = replicas_input(small)
    tp = {"1": GroupMeta(ranks=[0, 1], dim="tp"), "2": GroupMeta(ranks=[0], dim="dp")}
    ctx.ranks.update({r: msgspec.structs.replace(m, groups=tp) for r, m in ctx.ranks.items()})
    assert "INDEPENDENT_REPLICAS" not in [f.code for f in diagnose(ctx).findings]
    lone = {"1": GroupMeta(ranks=[0], dim="tp"), "2": GroupMeta(ranks=[0, 1], dim="dp")}
    ctx.ranks.update({r: msgspec.structs.replace(m, groups=lone) for r, m in ctx.ranks.items()})
    assert diagnose(ctx).findings[0].code == "INDEPENDENT_REPLICAS"


def test_unknown_optimizer_abstains():
    codes = [f.code for f in diagnose(replicas_input((), params=None)).findings]
    assert "INDEPENDENT_REPLICAS" not in codes


def test_a_hang_is_the_first_finding_and_the_verdict():
    ranks = [
        RankHang(0, 10, True, op="all_reduce", group="0", seq=6, nbytes=16, in_collective=True,
                 collective_for_s=69.0, phase="backward", steps_done=6),
        RankHang(1, 11, True, op="all_reduce", group="0", seq=5, nbytes=16,
                 collective_for_s=69.0, phase="outside", steps_done=6),
    ]  # fmt: skip
    hang = HangReport(0.0, 69.0, 60.0, "events", tuple(ranks), tuple(verdicts(ranks)))
    coll = collectives([(1024, 50.0, 0.1)], calls_per_step=40)
    steps = [rank_steps(r, 100.0, comm_wait=29.0) for r in (0, 1)]
    a = analysis(steps, collectives=coll).replaced(hang=hang)
    d = diagnose(make_input(a, ranks=good_ranks()))
    assert d.findings[0].code == "HANG"
    assert d.verdict.line.startswith(
        "hang: the run stopped progressing: rank 1 has not entered all_reduce #6"
    )
    assert "communication latency" not in d.verdict.line
