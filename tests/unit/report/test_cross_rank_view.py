"""Terminal sections of the cross-rank analysis, rendered to a fixed-width console."""

from __future__ import annotations

import dataclasses
import io
import json

import msgspec
from report_runs import BUCKET, STEPS, WARMUP, build
from rich.console import Console

from scalescope.analyze.cross_rank import (
    ClockAlignment,
    CrossRankAnalysis,
    Overlap,
    RankWaits,
    Straggler,
    WaitStats,
)
from scalescope.report import render_terminal
from scalescope.report.media.report_json import report_json
from scalescope.report.views.cross_rank import render_cross_rank, straggler_line


def _render(analysis, whole: bool = False) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    (render_terminal if whole else render_cross_rank)(analysis, console)
    return console.file.getvalue()


def _line_with(text: str, *needles: str) -> str:
    for line in text.splitlines():
        if all(n in line for n in needles):
            return line
    raise AssertionError(f"no line with {needles!r} in:\n{text}")


def _cells(line: str) -> list[str]:
    return line.replace("│", " ").split()


CROSS = CrossRankAnalysis(
    clocks=(
        ClockAlignment(0, 0, 0, 0, "reference"),
        ClockAlignment(1, 5_000_000, 10_000, 400, "ping-pong"),
        ClockAlignment(2, -2_000_000, None, None, "wall-clock"),
    ),
    waits=(
        WaitStats(
            "all_reduce", "gradients", 1_048_576, 30, 10_000.0, 12_500.0, 6_666.7, 2_000.0, 76.9
        ),
    ),  # fmt: skip
    ranks=(
        RankWaits(0, 0, 0.0, 0.0, 50.25, 26.0, 40, 0.0, 0.0),
        RankWaits(1, 39, 97.5, 50_200.0, 0.1, 76.0, 40, 48.94, 100.0),
    ),
    matched_instances=44,
    unmatched_instances=3,
    load_imbalance_pct=49.0,
    straggler=Straggler(1, 97.5, 50.2, "forward", 50.1, 100.0, 48.94),
    overlap=Overlap(12.5, 2.5, 10.0, 20.0, exposed_transfer_ms_per_step=3.25),
    tie_tolerance_us=50.0,
    measured_instances=40,
)


def test_sections_follow_the_collectives(tmp_path):
    text = _render(build(tmp_path), whole=True)
    assert text.index("Collectives by message size") < text.index("Across ranks")
    assert "Waiting for the last rank versus transfer" in text
    assert "Per rank (measured steps)" in text


def test_identical_ranks_wait_nothing_and_have_no_straggler(tmp_path):
    analysis = build(tmp_path)
    text = _render(analysis)
    assert "no straggler" in _line_with(text, "straggler")
    assert "wall-clock" in _line_with(text, "clock rank 1")
    assert "reference" in _line_with(text, "clock rank 0")
    measured = 2 * (STEPS - WARMUP)
    cells = _cells(_line_with(text, "all_reduce", f"{BUCKET:,}"))
    assert cells[:5] == ["all_reduce", "gradients", f"{BUCKET:,}", str(measured), "0.0"]
    assert cells[6] == "0.0"  # wait avg
    for rank in range(4):
        row = _cells(_line_with(text, f"│    {rank} │"))
        assert row[1:4] == ["0", "of", str(measured)] and row[6] == "0.00"  # last, wait


def test_straggler_clocks_and_overlap_lines(tmp_path):
    analysis = build(tmp_path, world_size=3).replaced(cross_rank=CROSS)
    text = _render(analysis)
    straggler = _line_with(text, "straggler")
    assert "rank 1 causes 100% of the waiting (48.94 ms per step): last at 39 of 40" in straggler
    flat = " ".join(text.split())  # the straggler sentence wraps in the grid
    sentence = "39 of 40 collectives, 50.20 ms late on average; it spends 50.10 ms more per step"
    assert f"{sentence} in forward than the others" in flat
    assert "+5.000 ms ± 10.0 µs, drift +0.4 µs (ping-pong)" in _line_with(text, "clock rank 1")
    assert "-2.000 ms ± unknown (wall-clock)" in _line_with(text, "clock rank 2")
    assert "44 matched" in text and "(40 in measured steps), 3 unmatched" in text
    assert "49.0 %" in _line_with(text, "load imbalance")
    overlap = _line_with(text, "overlap")
    assert "12.50 ms/step: 2.50 ms hidden under backward (20.0%), 10.00 ms exposed" in overlap
    flat = " ".join(text.split())
    assert "of which 3.25 ms moving bytes (the least per step over the ranks)" in flat
    assert "ideal throughput" not in text  # the what-if's section says what fixing buys
    row = _cells(_line_with(text, "all_reduce", "1,048,576"))
    assert row[2:] == ["1,048,576", "30", "10,000.0", "12,500.0", "6,666.7", "2,000.0", "76.9"]
    rank1 = _cells(_line_with(text, "│    1 │"))
    assert rank1 == ["1", "39", "of", "40", "97.5", "50.20", "48.94", "100.0", "0.10", "76.00"]
    assert _cells(_line_with(text, "│    0 │"))[5] == "n/a"  # never last: no lateness


def test_no_phase_and_many_ranks(tmp_path):
    clocks = (ClockAlignment(0, 0, 0, 0, "reference"),) + tuple(
        ClockAlignment(r, r * 1_000, 20_000 + r, -r, "ping-pong") for r in range(1, 12)
    )
    cross = dataclasses.replace(
        CROSS, clocks=clocks, straggler=Straggler(1, 97.5, 50.2, None, None, 100.0, 48.94)
    )
    text = _render(build(tmp_path).replaced(cross_rank=cross))
    assert "no phase of it takes longer than on the others" in " ".join(text.split())
    assert "clock rank" not in text
    assert "ping-pong: 11 ranks (1, 2, 3, ...): offsets +0.001 ms to +0.011 ms" in text
    assert "uncertainty up to 20.0 µs, |drift| up to 0.0 µs" in text
    assert "reference: 1 ranks (0)" in text


def test_nothing_for_one_rank_or_probe_off(tmp_path):
    assert _render(build(tmp_path / "one", world_size=1)) == ""
    assert _render(build(tmp_path / "off", probe=False)) == ""


def test_a_lost_rank_is_said(tmp_path):
    text = _render(build(tmp_path, world_size=2, written=(0,)))
    assert "fewer than two ranks recorded events" in text


def test_json_carries_the_cross_rank_fields(tmp_path):
    analysis = build(tmp_path, world_size=3).replaced(cross_rank=CROSS)
    doc = json.loads(msgspec.json.encode(report_json(analysis, None)))
    cross = doc["cross_rank"]
    assert list(doc)[-13:-1] == [
        "cross_rank", "hang", "pauses", "links", "whatif", "whatif_missing", "groups", "dims",
        "copies", "slowdowns", "p2p", "pipeline",
    ]  # fmt: skip
    assert cross["straggler"] == {
        "rank": 1,
        "last_share_pct": 97.5,
        "lateness_avg_ms": 50.2,
        "phase": "forward",
        "phase_excess_ms": 50.1,
        "lateness_share_pct": 100.0,
        "lateness_ms_per_step": 48.94,
        "between": None,
        "share_needed_pct": 50.0,
        "stage": None,
        "cpu": None,
    }
    assert cross["clocks"][2] == {
        "rank": 2,
        "offset_ns": -2_000_000,
        "uncertainty_ns": None,
        "drift_ns": None,
        "method": "wall-clock",
    }
    assert cross["ranks"][1]["instances"] == 40
    assert cross["ranks"][1]["lateness_share_pct"] == 100.0
    assert cross["ranks"][1]["stage"] is None
    assert (cross["tie_tolerance_us"], cross["measured_instances"]) == (50.0, 40)
    assert (
        json.loads(msgspec.json.encode(report_json(build(tmp_path / "one", world_size=1), None)))[
            "cross_rank"
        ]
        is None
    )


def test_a_straggler_outside_the_phases_is_said_with_where():
    outside = Straggler(1, 97.5, 50.2, "other", 80.4, 100.0, 78.15, ("optimizer", "data"))
    line = " ".join(straggler_line(dataclasses.replace(CROSS, straggler=outside), 50.0).split())
    assert line.endswith(
        "it spends 80.40 ms more per step outside the recorded phases (other), between the "
        "optimizer step and the next batch, than the others"
    )
