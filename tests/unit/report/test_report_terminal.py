"""Terminal report: sections in order and the key numbers with their units."""

from __future__ import annotations

import io

from report_runs import (
    ALLREDUCE_MS,
    BUCKET,
    PHASE_MS,
    SAMPLES,
    STEP_MS,
    STEPS,
    WARMUP,
    build,
)
from rich.console import Console

from scalescope.events import RankMeta
from scalescope.events.units import fmt_bytes_exact
from scalescope.report import render_terminal


def _render(analysis) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    render_terminal(analysis, console)
    return console.file.getvalue()


def _line_with(text: str, *needles: str) -> str:
    """The first line holding every needle (fails the test if none does)."""
    for line in text.splitlines():
        if all(n in line for n in needles):
            return line
    raise AssertionError(f"no line with {needles!r} in:\n{text}")


def test_header_and_sections_of_a_healthy_run(tmp_path):
    text = _render(build(tmp_path))
    for needle in ("run run-42", "resnet18", "4 ranks (2 per node)", "node-0, node-1"):
        assert needle in text
    assert "completed" in _line_with(text, "status")
    assert "60.0 s" in _line_with(text, "duration")
    assert "Failures" not in text and "Problems" not in text
    order = ["Throughput and step time", "Step phases per rank", "Collectives per op"]
    order.append("Collectives by message size")
    positions = [text.index(section) for section in order]
    assert positions == sorted(positions)


def test_throughput_and_phase_numbers(tmp_path):
    text = _render(build(tmp_path))
    measured = STEPS - WARMUP
    samples = 4 * measured * SAMPLES
    span_s = measured * STEP_MS / 1e3
    assert f"{samples / span_s:,.1f} samples/s" in text
    assert f"{samples:,} over {span_s:.3f} s" in text
    assert f"{STEP_MS:.2f} ms" in _line_with(text, "mean step time")
    other_ms = STEP_MS - sum(PHASE_MS.values())
    for phase, ms in [*PHASE_MS.items(), ("other", other_ms)]:
        cells = _line_with(text, f" {phase} ").split()
        share = 100 * ms / STEP_MS
        assert f"{ms:.2f}" in cells and f"{share:.1f}" in cells, cells
    for header in ("mean (ms)", "p50 (ms)", "p95 (ms)", "share (%)", "samples/s", "span (s)"):
        assert header in text
    assert "3.00 GiB rss_peak" in text


def test_collectives_in_nccl_tests_columns(tmp_path):
    text = _render(build(tmp_path, world_size=4))
    for header in ("size (B)", "count", "avg (µs)", "min (µs)", "max (µs)", "total (ms)"):
        assert header in text
    assert "algbw (GB/s)" in text and "busbw (GB/s)" in text
    row = _line_with(text, "all_reduce", f"{BUCKET:,}")
    algbw = BUCKET / (ALLREDUCE_MS * 1e-3) / 1e9
    busbw = algbw * 2 * (4 - 1) / 4
    calls = 2 * STEPS
    cells = row.replace("│", " ").split()
    assert cells[:3] == ["all_reduce", f"{BUCKET:,}", str(calls)]
    assert cells[3:6] == [f"{ALLREDUCE_MS * 1000:,.1f}"] * 3
    assert cells[6:] == [f"{calls * ALLREDUCE_MS:.2f}", f"{algbw:.2f}", f"{busbw:.2f}"]
    per_op = _line_with(text, "all_reduce", "gradients", "MiB")
    assert f"{calls * ALLREDUCE_MS:.2f}" in per_op
    assert f"{calls * BUCKET / 2**20:.2f} MiB" in per_op
    assert fmt_bytes_exact(2 * BUCKET) in _line_with(text, "gradients", "8.00 MiB")


def test_failures_and_problems_come_first(tmp_path):
    error = "Traceback (most recent call last):\n" + "\n".join(f"  frame {i}" for i in range(9))
    error += "\nRuntimeError: [rank 3] boom"
    failed = RankMeta(rank=3, hostname="node-1", status="failed", exit_code=1, error=error)
    text = _render(build(tmp_path, written=(0, 1, 2), status="failed", rank_status={3: failed}))
    assert text.index("Failures") < text.index("Problems") < text.index("Throughput")
    assert "rank 3 on node-1: failed, exit code 1" in _line_with(text, "node-1", "failed")
    assert "(first to fail)" in _line_with(text, "node-1", "failed")
    assert "RuntimeError: [rank 3] boom" in text  # the last lines, markup left alone
    assert "frame 0" not in text  # older lines are cut
    assert "rank 3: event file rank-00003.arrows is missing" in text
    per_op = _line_with(text, "all_reduce", "gradients", "MiB").replace("│", " ").split()
    assert per_op[:4] == ["all_reduce", "gradients", "3", str(2 * STEPS)]  # 3 ranks recorded


def test_interrupted_run_lists_its_ranks(tmp_path):
    killed = RankMeta(rank=0, status="interrupted", exit_code=-15, error="Signal 15 (SIGTERM)")
    text = _render(build(tmp_path, status="interrupted", rank_status={0: killed}))
    assert "Failures" in text
    assert "rank 0 on n/a: interrupted, exit code -15" in text
    assert "first to fail" not in text
    assert "Signal 15 (SIGTERM)" in text


def test_peer_loss_is_not_the_first_failure(tmp_path):
    lost = RankMeta(
        rank=0,
        hostname="node-0",
        status="failed",
        exit_code=1,
        end_time=10.0,
        error="RuntimeError: Connection closed by peer [127.0.0.1]:1234",
    )
    cause = RankMeta(
        rank=1,
        hostname="node-0",
        status="failed",
        exit_code=1,
        end_time=11.0,
        error="ValueError: bad batch",
    )
    text = _render(build(tmp_path, status="failed", rank_status={0: lost, 1: cause}))
    assert "rank 1 on node-0: failed, exit code 1" in _line_with(text, "first to fail")
    assert "(lost a peer)" in _line_with(text, "rank 0 on node-0")
    assert text.index("rank 1 on node-0") < text.index("rank 0 on node-0")


def test_probe_off_says_why_there_is_nothing(tmp_path):
    text = _render(build(tmp_path, probe=False))
    assert "probe off" in text
    assert "No step events" in text and "No collectives" in text
    assert "samples/s" not in text and "GB/s" not in text  # no invented zeros
