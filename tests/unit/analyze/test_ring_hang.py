"""A hang's culprit named from the ranks' flight recorders: 64 rings of a synthetic DDP job
(benchmarks/synthetic_rings.py) in which one rank never completed an all_reduce its peers
completed, read by the launcher's hang watch as it reads a live job's; and the rings of
ranks that all completed the same call name nobody."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze.watch.hang import RankHang  # noqa: E402
from scalescope.analyze.watch.ring_calls import RingCall  # noqa: E402
from scalescope.analyze.watch.ring_hang import ring_verdicts  # noqa: E402
from scalescope.diagnose.hang_words import verdict_line  # noqa: E402
from scalescope.events.files import HANG_FILE, HANG_TEXT  # noqa: E402
from scalescope.launch.options.groups import HangOptions  # noqa: E402
from scalescope.launch.watch.hang import HangWatch  # noqa: E402
from scalescope.report.views.hang import render_hang  # noqa: E402
from synthetic_rings import RecordedSource, write_rings  # noqa: E402


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rings")
    truth = write_rings(run_dir, ranks=64, rows=1024, stuck=37)
    options = HangOptions(after_s=30.0, slowdown_pct=0.0, render=render_hang)
    watch = HangWatch(run_dir, 64, options, RecordedSource(truth.states))
    watch.on_hang(truth.states, idle=60.0, threshold=30.0)
    return run_dir, truth


def test_the_rings_name_the_stuck_rank_and_its_call(hung):
    run_dir, truth = hung
    report = json.loads((run_dir / HANG_FILE).read_text())
    from_rings = [v for v in report["verdicts"] if v["kind"] == "unfinished"]
    assert len(from_rings) == 1
    v = from_rings[0]
    assert (v["ranks"], v["op"], v["group"], v["seq"], v["nbytes"]) == (
        [37],
        "all_reduce",
        "0",
        truth.seq,
        25 * 1024 * 1024,
    )
    assert v["waiting"] == [r for r in range(64) if r != 37]
    stuck = report["ranks"][37]["last_calls"][0]
    assert (stuck["seq"], stuck["step"]) == (truth.seq - 1, truth.step)
    assert all(r["last_calls"][0]["seq"] == truth.seq for r in report["ranks"] if r["rank"] != 37)


def test_the_hang_text_says_it_and_lists_the_named_ranks_only(hung):
    run_dir, truth = hung
    text = (run_dir / HANG_TEXT).read_text()
    assert (
        f"rank 37 on node004 has not completed all_reduce #{truth.seq} (group 0, 25.0 MiB) "
        "that ranks 0-36, 38-63 completed (their flight recorders)"
    ) in text
    lines = text.splitlines()
    listed = [line.split("'")[0].split()[-1] for line in lines if "last calls (" in line]
    assert listed == ["0", "37"], "the named rank and the first of those waiting"
    assert "(62 other ranks' states and last calls: hang.json)" in text


def _call(seq: int, done: bool = True, group: str = "0") -> RingCall:
    return RingCall(1, "all_reduce", group, seq, 64, "", 0.0, 0.001 if done else None)


def test_ranks_that_completed_the_same_last_call_name_nobody():
    ranks = [
        RankHang(rank=0, pid=1, alive=True, last_calls=(_call(12), _call(11))),
        RankHang(rank=1, pid=2, alive=True, last_calls=(_call(13, done=False), _call(12))),
        RankHang(rank=2, pid=3, alive=True),
    ]
    assert ring_verdicts(ranks) == []


def test_each_group_and_call_is_its_own_verdict():
    ranks = [
        RankHang(rank=0, pid=1, alive=True, last_calls=(_call(5, group="1"), _call(9))),
        RankHang(rank=1, pid=2, alive=True, last_calls=(_call(4, group="1"), _call(9))),
        RankHang(rank=2, pid=3, alive=True, last_calls=(_call(7),)),
    ]
    verdicts = ring_verdicts(ranks)
    got = [(v.group, v.seq, v.ranks, v.waiting, v.op) for v in verdicts]
    assert got == [("0", 8, (2,), (0, 1), ""), ("1", 5, (1,), (0,), "all_reduce")]
    by_rank = {r.rank: r for r in ranks}
    assert verdict_line(verdicts[0], by_rank) == (
        "rank 2 has not completed call #8 (group 0) that ranks 0-1 completed (their flight "
        "recorders)"
    ), "#8 is in no ring's last calls: its op is not known"
