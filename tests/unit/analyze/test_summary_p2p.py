"""Sends and receives per step on a run recorded as summaries: their figures are the window
steps' (the steps that hold every call's row), not diluted over the summarised steps."""

from __future__ import annotations

import pytest
from analyze_runs import make_run
from test_p2p import rows, step

from scalescope.analyze.layouts.p2p import analyze_p2p, pair_p2p
from scalescope.analyze.ranks.clocks import align_clocks
from scalescope.analyze.steps.step_slots import measured_slots
from scalescope.events import Kind


def summarised(n: int, rank: int) -> list[tuple]:
    """Step ``n`` as ``--record summary`` writes it outside the windows: its STEP row and a
    SUMMARY row of its calls (what they were does not matter here)."""
    peer = 1 if rank != 1 else 0
    summary = (n, int(Kind.SUMMARY), "send", 0, 0, 4096, 1, "float32", "0", 12, "user", peer)
    return [step(n), summary]


def figures(run):
    sides = pair_p2p(run.events, align_clocks(run))
    result = analyze_p2p(run.events, sides, measured_slots(run.events, 0))
    return [
        x
        for r in result.ranks
        for x in (r.rank, r.wait_ms_per_step, r.transfer_ms_per_step, r.bytes_per_step)
    ]


def test_per_step_figures_are_the_windows(tmp_path):
    full = make_run(tmp_path, rows(), world_size=3, warmup_steps=0)
    more = {r: [batch + summarised(2, r) + summarised(3, r)] for r, (batch,) in rows().items()}
    summary = make_run(tmp_path, more, world_size=3, warmup_steps=0)
    assert figures(summary) == pytest.approx(figures(full))
    assert figures(full)[3::4] == [12288.0, 16384.0, 4096.0]  # bytes a step, ranks 0-2
