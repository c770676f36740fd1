"""Test helper (not a test module): what a run of tests/e2e/scripts/p2p_pipeline.py must show
of its heavy last stage, judged on the recorded run (tests/data/runs/p2p_pipeline) in CI and
on live runs only where timing may be judged (heavy tests)."""

from __future__ import annotations

from analysed import analysed  # noqa: E402

from scalescope.events import Run

STAGES, STEPS, MICRO, BATCH, HIDDEN, SLEEP_MS, WARMUP = 3, 8, 3, 8, 32, 15.0, 2
"""The script's arguments, as the live test and the recorder run it."""


def assert_the_light_stages_wait_for_the_heavy_one(run: Run) -> None:
    """Stage 0 computes almost nothing; each step it waits for the last stage's MICRO
    forwards of SLEEP_MS (the gradients come back only after them). That wait is counted
    as waiting in communication, so its own time per step is far below it."""
    analysis = analysed(run)
    p2p = {r.rank: r for r in analysis.p2p.ranks}
    heavy_ms = MICRO * SLEEP_MS
    assert p2p[0].wait_ms_per_step > 0.7 * heavy_ms
    assert p2p[2].wait_ms_per_step < 0.5 * heavy_ms  # the heavy stage hardly waits
    ranks = {r.rank: r for r in analysis.cross_rank.ranks}
    assert ranks[0].wait_ms_per_step >= p2p[0].wait_ms_per_step - 1e-6
    step_ms = {s.rank: s.mean_step_ms for s in analysis.steps.ranks}
    assert ranks[0].busy_ms_per_step < step_ms[0] - 0.7 * heavy_ms
    assert ranks[2].busy_ms_per_step > heavy_ms  # the sleeps are its own time
    peers = {(p.rank, p.peer, p.op): p for p in analysis.p2p.peers}
    assert peers[(0, 1, "recv")].wait_ms > peers[(0, 1, "send")].wait_ms
