"""The figures a report of many ranks draws, computed by the analysis (issue 48: views compute
nothing): the slowest-first order, each per-rank figure's percentiles, the nodes against the
median node; kept once computed and never in the report JSON. A synthetic run of 32 ranks, 8 a
node, rank 13 (node001) 30 % slower."""

from __future__ import annotations

import numpy as np
import pytest
from analysed import analysed
from many_ranks import write_many_ranks_run

from scalescope.analyze.rank_spread import PERCENTILES, spread
from scalescope.events import load_run
from scalescope.report.media.report_json import report_json

SLOW = 13


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    path = tmp_path_factory.mktemp("r") / "run"
    return analysed(load_run(write_many_ranks_run(path, 32, 20, slow={SLOW: 1.3})))


def test_the_slowest_rank_leads_the_order(analysis):
    order = analysis.slowest_first
    assert order.metric == "busy time per step" and order.ranks[0] == SLOW
    assert sorted(order.ranks) == list(range(32))


def test_each_spread_is_numpys_percentiles_over_the_ranks(analysis):
    busy = [r.busy_ms_per_step for r in analysis.cross_rank.ranks]
    want = tuple(float(np.percentile(busy, q)) for _, q in PERCENTILES)
    assert analysis.spreads.columns["busy_ms_per_step"].values == want
    assert spread([None, None]) is None and spread([2.0, None]).values == (2.0,) * 5
    backward = next(p for p in analysis.spreads.phases if p.phase == "backward")
    assert backward.slowest_rank == SLOW


def test_the_slow_node_is_busiest_against_the_median(analysis):
    nodes = analysis.nodes
    assert [len(n.ranks) for n in nodes] == [8] * 4
    assert nodes[0].host == "node001" and nodes[0].busiest_rank == SLOW
    assert nodes[0].busy_vs_median_pct > 1.0
    assert all(abs(n.busy_vs_median_pct) < 1.0 for n in nodes[1:])


def test_the_figures_are_kept_and_stay_out_of_the_json(analysis):
    assert analysis.spreads is analysis.spreads and analysis.nodes is analysis.nodes
    doc = report_json(analysis, None)
    assert not {"spreads", "nodes", "slowest_first", "straggler_need_pct"} & set(doc)
    assert analysis.builds["spreads"] == analysis.builds["nodes"] == 1
