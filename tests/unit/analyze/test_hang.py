"""The hang verdict from each rank's last state, and its words."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scalescope.analyze.watch.hang import RankHang, hang_threshold_s, last_by_rank, verdicts
from scalescope.diagnose.hang_words import verdict_line


def rank(r: int, op: str = "all_reduce", seq: int = 6, inside: bool = True, **kw) -> RankHang:
    values = dict(
        rank=r, pid=100 + r, alive=True, op=op, group="0", seq=seq, nbytes=16,
        in_collective=inside, collective_for_s=95.0, phase="backward", steps_done=6,
    )  # fmt: skip
    return RankHang(**(values | kw))


def test_a_rank_in_host_work_has_not_entered_the_collective_the_other_waits_in():
    ranks = [rank(0), rank(1, seq=5, inside=False, phase="outside")]
    [v] = verdicts(ranks)
    assert (v.kind, v.ranks, v.waiting, v.op, v.seq, v.nbytes) == (
        "missing", (1,), (0,), "all_reduce", 6, 16,
    )  # fmt: skip
    assert verdict_line(v, {r.rank: r for r in ranks}) == (
        "rank 1 has not entered all_reduce #6 (group 0, 16 B) that rank 0 waits in for 95 s; "
        "rank 1 is in host work (outside the recorded phases) since step 6"
    )


def test_same_sequence_number_different_ops_is_a_mismatch():
    ranks = [rank(0), rank(1, op="broadcast"), rank(2)]
    [v] = verdicts(ranks)
    assert (v.kind, v.ranks, v.waiting, v.op, v.other_op) == (
        "mismatch", (1,), (0, 2), "all_reduce", "broadcast",
    )  # fmt: skip
    assert verdict_line(v, {r.rank: r for r in ranks}).startswith(
        "ranks 0, 2 called all_reduce, rank 1 called broadcast with the same sequence number"
    )


def test_a_tie_takes_the_lowest_ranks_op_as_the_reference():
    [v] = verdicts([rank(0, op="broadcast"), rank(1)])
    assert (v.op, v.other_op, v.waiting) == ("broadcast", "all_reduce", (0,))


def test_an_earlier_collective_is_behind_and_a_gone_process_ended():
    ranks = [rank(0), rank(1, seq=4), rank(2, alive=False, ended="failed", inside=False, seq=5)]
    kinds = {v.kind: v.ranks for v in verdicts(ranks)}
    assert kinds == {"behind": (1,), "ended": (2,)}


def test_all_ranks_in_the_same_collective_and_no_rank_in_any():
    [v] = verdicts([rank(0), rank(1)])
    assert v.kind == "all_waiting" and v.waiting == (0, 1)
    [v] = verdicts([rank(0, inside=False), rank(1, inside=False)])
    assert v.kind == "host_work" and v.ranks == (0, 1)


def test_threshold_is_ten_steps_and_at_least_the_floor():
    assert hang_threshold_s(None) == 30.0
    assert hang_threshold_s(0.5) == 30.0
    assert hang_threshold_s(7.0) == 70.0
    assert hang_threshold_s(0.1, floor_s=0.5) == 1.0


def test_a_hang_is_rebuilt_from_the_events_of_an_interrupted_run(tmp_path):
    """No hang.json (Ctrl-C before the launcher saw it): rank 0 ended in an all_reduce it had
    waited in for 69 s, rank 1 in host work after step 6."""
    from analyze_runs import make_run
    from run_builders import coll_row, step_row

    from scalescope.analyze.watch.hang import run_hang
    from scalescope.events import RankMeta

    s = 1_000_000_000
    rows = {r: [[step_row(k, k * s // 10, s // 10, 8) for k in range(6)]] for r in (0, 1)}
    for r in (0, 1):
        rows[r][0] += [coll_row(k, "all_reduce", k * s // 10 + s // 20, 1000, 16, k, tag="user")
                       for k in range(6)]  # fmt: skip
    rows[0][0].append(coll_row(6, "all_reduce", 7 * s // 10, -1, 16, 6, tag="user"))
    end = 0.7 + 69.0  # wall seconds: offsets 0, so the event times are the wall clock
    files = {r: RankMeta(rank=r, world_size=2, status="interrupted", end_time=end, steps=6)
             for r in (0, 1)}  # fmt: skip
    run = make_run(tmp_path, rows, world_size=2, rank_files=files, status="interrupted")
    hang = run_hang(run)
    assert hang is not None and hang.source == "events"
    assert round(hang.idle_s) == 69
    [v] = hang.verdicts
    assert (v.kind, v.ranks, v.waiting, v.op, v.seq, v.nbytes) == (
        "missing", (1,), (0,), "all_reduce", 6, 16,
    )  # fmt: skip
    assert verdict_line(v, {r.rank: r for r in hang.ranks}).endswith(
        "rank 1 ended after step 6 (its phase then was not recorded)"
    )


def test_a_wait_the_stop_broke_is_still_the_hang(tmp_path):
    """Ctrl-C reached rank 1 in host work first; it exited, and rank 0's all_reduce, in which
    it had waited 16.9 s, ended 2.5 ms before rank 0 did (gloo: connection closed by peer).
    The same wait ended 3 s before the rank's end, or lasting under the threshold, is not."""
    from analyze_runs import make_run
    from run_builders import coll_row, step_row

    from scalescope.analyze.watch.hang import recorded_hang
    from scalescope.events import RankMeta

    s = 1_000_000_000
    wait_s, start = 16.9, 0.7

    def run_with(end_gap_s: float, lasted_s: float, folder: str):
        rows = {r: [[step_row(k, k * s // 10, s // 10, 8) for k in range(6)]] for r in (0, 1)}
        for r in (0, 1):
            rows[r][0] += [coll_row(k, "all_reduce", k * s // 10 + s // 20, 1000, 16, k, tag="user")
                           for k in range(6)]  # fmt: skip
        rows[0][0].append(coll_row(6, "all_reduce", int(start * s), int(lasted_s * s), 16, 6))
        ends = {0: start + lasted_s + end_gap_s, 1: start + lasted_s - 0.9}
        files = {r: RankMeta(rank=r, world_size=2, status="interrupted", end_time=ends[r], steps=6)
                 for r in (0, 1)}  # fmt: skip
        return make_run(tmp_path / folder, rows, world_size=2, rank_files=files,
                        status="interrupted")  # fmt: skip

    hang = recorded_hang(run_with(0.0025, wait_s, "broken"), 0.1)
    assert hang is not None and hang.source == "events"
    assert abs(hang.idle_s - wait_s) < 0.01
    [v] = hang.verdicts
    assert (v.kind, v.ranks, v.waiting, v.seq) == ("missing", (1,), (0,), 6)
    assert recorded_hang(run_with(3.0, wait_s, "completed"), 0.1) is None
    assert recorded_hang(run_with(0.0025, 0.9, "short"), 0.1) is None


def test_a_hang_across_nodes_names_the_host_of_the_stuck_rank():
    from scalescope.analyze.watch.hang import HangReport
    from scalescope.report.views.hang import hang_lines

    stuck = dict(seq=5, inside=False, phase="outside")
    ranks = [rank(0, host="node-a"), rank(1, host="node-a"), rank(2, host="node-b"),
             rank(3, host="node-b", **stuck)]  # fmt: skip
    [v] = verdicts(ranks)
    line = verdict_line(v, {r.rank: r for r in ranks})
    assert line.startswith("rank 3 on node-b has not entered all_reduce #6")
    report = HangReport(0.0, 95.0, 30.0, "live", tuple(ranks), (v,))
    table = hang_lines(report, stacks="none")[2:7]
    assert table[0].split()[:3] == ["rank", "host", "pid"]
    assert table[4].split()[:3] == ["3", "node-b", "103"]
    one_node = [replace(r, host="node-a") for r in ranks]
    assert verdict_line(v, {r.rank: r for r in one_node}).startswith("rank 3 has not entered")
    assert "host" not in hang_lines(replace(report, ranks=tuple(one_node)), stacks="none")[2]


@pytest.mark.parametrize("shuffled", [False, True])
def test_last_by_rank_is_each_ranks_first_largest_row(shuffled: bool) -> None:
    """Rows in rank order (a loaded run) and in any order give each rank's first row of
    largest value, as a loop over the rows does."""
    rng = np.random.default_rng(3)
    rank = np.sort(rng.integers(0, 6, 400)).astype(np.int32)
    value = rng.integers(0, 20, 400)  # repeated maxima: the first one counts
    if shuffled:
        order = rng.permutation(400)
        rank, value = rank[order], value[order]
    want: dict[int, tuple[int, int]] = {}
    for i, (r, v) in enumerate(zip(rank.tolist(), value.tolist(), strict=True)):
        at, n = want.get(r, (i, 0))
        want[r] = (i if v > value[at] else at, n + 1)
    assert last_by_rank(rank, value) == want
