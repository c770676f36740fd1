"""Collectives by op and size against nccl-tests formulas written out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import GRAD_BUCKETS, coll_row, make_run, synth_rank

from scalescope.analyze import bus_factor

WARMUP = 2
STEPS = 6


def _approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=1e-12)


def _nccl_busbw(op: str, algbw: float, n: int) -> float | None:
    """nccl-tests ``*GetBw``: busBw = algBw * factor."""
    if op == "all_reduce":
        return algbw * 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return algbw * (n - 1) / n
    if op in ("broadcast", "reduce", "send", "recv"):
        return algbw
    return None


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 4, 1.5),
        ("all_reduce", 2, 1.0),
        ("all_reduce", 1, 0.0),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("all_to_all", 2, 0.5),
        ("broadcast", 4, 1.0),
        ("reduce", 4, 1.0),
        ("send", 2, 1.0),
        ("recv", 2, 1.0),
        ("barrier", 4, None),
    ],
)
def test_bus_factors_are_nccl_tests(op, n, factor):
    assert bus_factor(op, n) == factor


def _world(n: int):
    ranks = [synth_rank(r, STEPS, warmup_steps=WARMUP, seed=n) for r in range(n)]
    for r in ranks:  # one barrier per rank: no payload, no bandwidth
        r.rows.append(coll_row(STEPS - 1, "barrier", 0, 20_000, 0, 999, "user"))
        r.collectives.append((STEPS - 1, "barrier", 0, 20_000, "user"))
    return ranks


@pytest.mark.parametrize("n", [2, 4])
def test_by_message_size_matches_nccl_tests_formulas(tmp_path, n):
    ranks = _world(n)
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=n, warmup_steps=WARMUP)
    coll = analysed(run).collectives
    assert coll is not None and coll.world_size == n and coll.num_ranks == n
    raw: dict[tuple[str, int], list[int]] = {}
    for r in ranks:
        for _, op, nbytes, dur, _ in r.collectives:
            raw.setdefault((op, nbytes), []).append(dur)
    assert [(z.op, z.nbytes) for z in coll.sizes] == sorted(raw)
    for z in coll.sizes:
        durs = np.array(raw[(z.op, z.nbytes)], dtype=float)
        assert z.num_ranks == n
        assert z.calls == len(durs)
        assert z.calls_per_rank == len(durs) / n
        assert z.time_avg_us == _approx(durs.mean() / 1e3)
        assert z.time_min_us == _approx(durs.min() / 1e3)
        assert z.time_max_us == _approx(durs.max() / 1e3)
        assert z.total_ms_per_rank == _approx(durs.sum() / 1e6 / n)
        if z.nbytes == 0:
            assert z.algbw_gbps is None and z.busbw_gbps is None
            continue
        algbw = z.nbytes / (durs.mean() / 1e9) / 1e9  # GB/s, GB = 1e9 bytes
        assert z.algbw_gbps == _approx(algbw)
        assert z.busbw_gbps == _approx(_nccl_busbw(z.op, algbw, n))


def test_totals_per_op_and_tag(tmp_path):
    ranks = _world(2)
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=2, warmup_steps=WARMUP)
    coll = analysed(run).collectives
    raw: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for r in ranks:
        for _, op, nbytes, dur, tag in r.collectives:
            raw.setdefault((op, tag), []).append((nbytes, dur))
    assert {(o.op, o.tag) for o in coll.ops} == set(raw)
    for o in coll.ops:
        rows = raw[(o.op, o.tag)]
        assert o.calls == len(rows)
        assert o.calls_per_rank == len(rows) / 2
        assert o.total_ms_per_rank == _approx(sum(d for _, d in rows) / 1e6 / 2)
        assert o.nbytes_per_rank == _approx(sum(b for b, _ in rows) / 2)
        assert o.incomplete_calls == 0
    totals = [o.total_ms_per_rank for o in coll.ops]
    assert totals == sorted(totals, reverse=True)
    grads = next(o for o in coll.ops if o.op == "all_reduce")
    assert grads.calls_per_rank == STEPS * 2 * len(GRAD_BUCKETS)  # 2 backwards per step


def test_traffic_per_measured_step_by_tag(tmp_path):
    ranks = _world(2)
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=2, warmup_steps=WARMUP)
    per_step = {t.tag: t for t in analysed(run).collectives.per_step}
    assert "parameters" not in per_step  # DDP's construction broadcast is in warm-up
    measured = STEPS - WARMUP
    for tag in ("gradients", "buffers", "user"):
        rows = [c for r in ranks for c in r.collectives if c[4] == tag and c[0] >= WARMUP]
        assert per_step[tag].num_ranks == 2
        assert per_step[tag].nbytes_per_step == _approx(sum(c[2] for c in rows) / measured / 2)
        assert per_step[tag].calls_per_step == _approx(len(rows) / measured / 2)
    assert per_step["gradients"].nbytes_per_step == 2 * sum(GRAD_BUCKETS)
    assert per_step["gradients"].calls_per_step == 2 * len(GRAD_BUCKETS)


def test_incomplete_collectives_are_counted_apart(tmp_path):
    """Rank 1 crashed in step 4: two all_reduces issued, never completed."""
    ranks = _world(2)
    ranks[1].rows = [row for row in ranks[1].rows if row[0] < 4]
    ranks[1].collectives = [c for c in ranks[1].collectives if c[0] < 4]
    last_seq = max(row[9] for row in ranks[1].rows if row[1] == 1)
    ranks[1].rows += [
        coll_row(4, "all_reduce", 0, -1, GRAD_BUCKETS[0], last_seq + 1),
        coll_row(4, "all_reduce", 0, -1, GRAD_BUCKETS[1], last_seq + 2),
    ]
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=2, warmup_steps=WARMUP)
    coll = analysed(run).collectives
    assert coll.incomplete_calls == 2
    assert coll.calls == sum(len(r.collectives) for r in ranks)
    [inc] = coll.incomplete
    assert (inc.rank, inc.op, inc.tag, inc.calls) == (1, "all_reduce", "gradients", 2)
    assert (inc.first_seq, inc.first_step) == (last_seq + 1, 4)
    grads = next(o for o in coll.ops if o.op == "all_reduce")
    assert grads.incomplete_calls == 2
    done = [c for r in ranks for c in r.collectives if c[1] == "all_reduce"]
    assert grads.calls == len(done)
    assert grads.calls_per_rank == len(done) / 2  # rank 1 has fewer calls
    assert grads.total_ms_per_rank == _approx(sum(c[3] for c in done) / 1e6 / 2)
    big = next(z for z in coll.sizes if z.op == "all_reduce" and z.nbytes == GRAD_BUCKETS[0])
    durs = [c[3] for c in done if c[2] == GRAD_BUCKETS[0]]
    assert big.time_min_us == _approx(min(durs) / 1e3)  # -1 never enters the times


def test_no_collectives_abstains(tmp_path):
    synth = synth_rank(0, STEPS, warmup_steps=WARMUP)
    rows = [row for row in synth.rows if row[1] != 1]
    run = make_run(tmp_path, {0: [rows]}, world_size=1, warmup_steps=WARMUP)
    assert analysed(run).collectives is None


def test_ranks_that_made_different_counts_show_the_range_not_a_mean(tmp_path):
    """A hung run: rank 0 completed 7 all_reduces, rank 1 six. The table shows 6–7 calls,
    never the mean 6.50 (no rank made 6.5 calls)."""
    import io

    from rich.console import Console

    from scalescope.report.media.terminal import rich_table
    from scalescope.report.views.collectives import op_table

    def rows(n: int) -> list:
        return [[coll_row(s, "all_reduce", s * 1_000_000, 1000, 16, s, tag="user")]
                for s in range(n)]  # fmt: skip

    run = make_run(tmp_path, {0: rows(7), 1: rows(6)}, world_size=2, warmup_steps=0)
    [op] = analysed(run).collectives.ops
    assert (op.calls, op.calls_per_rank, op.calls_min, op.calls_max) == (13, 6.5, 6, 7)
    console = Console(file=io.StringIO(), width=120)
    console.print(rich_table(op_table(analysed(run).collectives)))
    text = console.file.getvalue()
    assert "6–7" in text and "6.50" not in text
