"""The timeline's ranks: ``--ranks`` parsing and errors, the default beyond 16 ranks (rank 0,
the 8 slowest and the 4 fastest by busy time per step) and every rank up to 16."""

from __future__ import annotations

import pytest
from analysed import analysed  # noqa: E402
from many_ranks import write_many_ranks_run

from scalescope.analyze.rank_spread import RankOrder
from scalescope.analyze.ranks.clocks import align_clocks, clock_offsets
from scalescope.events import load_run
from scalescope.report.subjects import RunReport
from scalescope.report.views.rank_select import (
    RankSpec,
    RankSpecError,
    parse_rank_spec,
    select_ranks,
    selected_trace,
    timeline_ranks,
)

SLOW = (13, 40)


def report_of(analysis, run, **kwargs) -> RunReport:
    offsets = clock_offsets(align_clocks(run))
    return RunReport(analysis=analysis, run=run, offsets_ns=offsets, **kwargs)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("r") / "run"
    run = load_run(write_many_ranks_run(run_dir, 64, 30, slow={13: 1.3, 40: 1.2}))
    return run, analysed(run)


def test_parse_items():
    assert parse_rank_spec("0,worst:8,best:4,5-7") == RankSpec(
        "0,worst:8,best:4,5-7", (0, 5, 6, 7), 8, 4, False
    )
    assert parse_rank_spec(" 3 , all ") == RankSpec(" 3 , all ", (3,), 0, 0, True)
    assert parse_rank_spec("worst:2,worst:5").worst == 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "an empty item is not a rank N, a range A-B, worst:K, best:K or all"),
        ("0,,1", "an empty item is not"),
        ("x", "'x' is not a rank N"),
        ("-1", "'-1' is not a rank N"),
        ("worst:", "'worst:' is not"),
        ("slow:3", "'slow:3' is not"),
        ("worst:0", "worst:0 selects no rank"),
        ("7-3", "range 7-3 ends before it starts"),
    ],
)
def test_bad_specs_name_the_item(text, message):
    with pytest.raises(RankSpecError) as err:
        parse_rank_spec(text)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(f"--ranks {text!r}: ")


def test_select_by_order():
    order = RankOrder("busy time per step", (5, 2, 9, 0, 1, 3), {})
    present = [0, 1, 2, 3, 5, 9]
    assert select_ranks(parse_rank_spec("worst:2"), present, order) == [2, 5]
    assert select_ranks(parse_rank_spec("best:2"), present, order) == [1, 3]
    assert select_ranks(parse_rank_spec("0,worst:1,best:1"), present, order) == [0, 3, 5]
    assert select_ranks(parse_rank_spec("worst:99"), present, order) == sorted(present)
    assert select_ranks(parse_rank_spec("all"), present, None) == sorted(present)


def test_select_errors():
    with pytest.raises(RankSpecError, match=r"rank 12 is not in this run \(ranks 0-9\)"):
        select_ranks(parse_rank_spec("1,12"), list(range(10)), None)
    with pytest.raises(RankSpecError, match="worst/best need step times"):
        select_ranks(parse_rank_spec("worst:2"), list(range(10)), None)


def test_default_beyond_16_ranks_is_rank_0_the_8_slowest_and_the_4_fastest(wide):
    run, analysis = wide
    order = analysis.slowest_first
    assert order is not None and order.metric == "busy time per step"
    assert order.ranks[:2] == SLOW
    ranks = timeline_ranks(analysis, run, None)
    assert ranks == sorted({0, *order.ranks[:8], *order.ranks[-4:]})
    assert len(ranks) == 13 and set(SLOW) <= set(ranks)
    assert timeline_ranks(analysis, run, "0,worst:1") == [0, 13]
    assert timeline_ranks(analysis, run, "all") == list(range(64))


def test_default_up_to_16_ranks_is_every_rank(tmp_path):
    run = load_run(write_many_ranks_run(tmp_path / "run", 16, 10))
    analysis = analysed(run)
    assert timeline_ranks(analysis, run, None) is None
    trace = selected_trace(report_of(analysis, run))
    pids = {e["pid"] for e in trace["traceEvents"]}
    assert len(pids) == 16
    assert trace["metadata"]["ranks"]["selection"] == "all"


def test_trace_holds_the_selected_ranks_and_says_so(wide):
    run, analysis = wide
    trace = selected_trace(report_of(analysis, run))
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert len(names) == 13 and "rank 13 (node001)" in names
    meta = trace["metadata"]["ranks"]
    assert meta["of"] == 64 and meta["selection"] == "0,worst:8,best:4"
    assert meta["order"] == "busy time per step" and len(meta["shown"]) == 13
    trace = selected_trace(report_of(analysis, run, steps=range(5, 7), ranks="40,2-3"))
    assert trace["metadata"]["ranks"]["shown"] == [2, 3, 40]
    assert {e["pid"] for e in trace["traceEvents"]} == {3, 4, 41}  # pid = rank + 1
