"""A straggler's CPU time in its late phase against its peers', on hand-built runs.

Three ranks on one clock, 40 ms steps (6, 1 warm-up), forward 10 ms each. Rank 1's forward
lasts ``EXTRA`` ms longer. Its CPU rows say whether it computed that time (its CPU time up by
as much) or waited it out (its CPU time as its peers').
"""

from __future__ import annotations

import pytest
from analyze_runs import make_run
from run_builders import cpu_row, phase_row, step_row

from scalescope.analyze.steps.phase_cpu import phase_cpu
from scalescope.analyze.steps.step_slots import measured_slots
from scalescope.analyze.steps.steps import analyze_steps
from scalescope.diagnose.rank_cpu import WAITED_SHARE

MS = 1_000_000
BASE, PERIOD, STEPS, WARMUP = 1_000 * MS, 40 * MS, 6, 1
FORWARD, EXTRA = 10 * MS, 8 * MS
PEERS_CPU = 9 * MS


def rank_rows(rank: int, computes: bool, cpu_rows: bool = True, thread: bool = True) -> list:
    rows = []
    for s in range(STEPS):
        t0 = BASE + s * PERIOD
        wall = FORWARD + (EXTRA if rank == 1 else 0)
        cpu = PEERS_CPU + (EXTRA if rank == 1 and computes else 0) + rank * MS // 10
        rows += [step_row(s, t0, PERIOD, 8), phase_row(s, "forward", t0 + MS, wall)]
        if cpu_rows:
            rows.append(cpu_row(s, "forward", t0 + MS, wall, cpu + 2 * MS, cpu if thread else -1))
    return rows


def _excess(tmp_path, computes: bool, **kwargs):
    rows = {r: [rank_rows(r, computes, **kwargs) if r != 2 else rank_rows(r, computes)]
            for r in range(3)}  # fmt: skip
    run = make_run(tmp_path, rows, world_size=3, warmup_steps=WARMUP)
    return phase_cpu(run.events, measured_slots(run.events, WARMUP), 1, "forward")


@pytest.mark.parametrize("computes", [True, False])
def test_computing_and_waiting_told_apart(tmp_path, computes: bool) -> None:
    cpu = _excess(tmp_path, computes)
    assert cpu is not None
    peers_mean = (0 + 2) / 2 * 0.1  # ms: the peers' CPU time differs by 0.1 ms a rank
    computed = (8.0 if computes else 0.0) + 0.1 - peers_mean
    assert cpu.wall_excess_ms == pytest.approx(8.0)
    assert cpu.thread_excess_ms == pytest.approx(computed)
    assert cpu.process_excess_ms == pytest.approx(computed)
    assert cpu.waited_ms == pytest.approx(8.0 - computed)
    assert (cpu.waited_ms >= WAITED_SHARE * cpu.wall_excess_ms) is not computes


def test_no_thread_clock_falls_back_to_the_process(tmp_path) -> None:
    cpu = _excess(tmp_path, True, thread=False)
    assert cpu is not None and cpu.thread_excess_ms is None
    assert cpu.computed_ms == pytest.approx(cpu.process_excess_ms)


def test_a_rank_without_cpu_rows_says_nothing(tmp_path) -> None:
    """An older probe on one rank: no comparison rather than one against fewer peers."""
    assert _excess(tmp_path, True, cpu_rows=False) is None


def test_each_phase_says_its_share_on_a_cpu(tmp_path) -> None:
    rows = {r: [rank_rows(r, computes=False)] for r in range(3)}
    run = make_run(tmp_path, rows, world_size=3, warmup_steps=WARMUP)
    steps = analyze_steps(run.events, WARMUP)
    shares = {(r.rank, p.phase): p.on_cpu_pct for r in steps.ranks for p in r.phases}
    assert shares[0, "forward"] == pytest.approx(100 * 9.0 / 10)
    assert shares[1, "forward"] == pytest.approx(100 * 9.1 / 18)
    assert shares[1, "other"] is None and shares[1, "step"] is None
