"""Timelines that do not fit together (a rank whose collectives end later and later than its
peers', as an unphysical generator or ranks of two runs give): the analysis names the ranks
that wait longer than their steps, the diagnosis says so first, and no share passes 100 %."""

from __future__ import annotations

import json

import pytest
from analysed import analysed  # noqa: E402
from many_ranks import write_many_ranks_run

from scalescope.diagnose import diagnose_run
from scalescope.events import load_run


@pytest.mark.parametrize("ranks", [2, 1024])
def test_a_drifting_rank_is_an_inconsistent_timeline_not_a_share_over_100(
    tmp_path, ranks: int
) -> None:
    steps = 12 if ranks > 2 else 30
    run = load_run(write_many_ranks_run(tmp_path / "run", ranks, steps, drift_ms={1: 300.0}))
    analysis = analysed(run)
    inconsistent = analysis.cross_rank.inconsistent
    assert inconsistent and all(w.share_pct > 25 for w in inconsistent)
    assert 1 not in {w.rank for w in inconsistent}, "the others wait for the drifting rank"
    diagnosis = diagnose_run(run, analysis)
    first = diagnosis.findings[0]
    assert first.code == "TIMELINE_INCONSISTENT" and "do not fit together" in first.summary
    shares = [f.share_pct for f in diagnosis.findings if f.share_pct is not None]
    assert all(s <= 100.0 for s in shares), shares
    assert diagnosis.verdict.top.code == "TIMELINE_INCONSISTENT"


def test_a_consistent_run_has_no_such_finding(tmp_path) -> None:
    run = load_run(write_many_ranks_run(tmp_path / "run", 16, 20, slow={3: 1.3}))
    analysis = analysed(run)
    assert analysis.cross_rank.inconsistent == ()
    codes = [f.code for f in diagnose_run(run, analysis).findings]
    assert "TIMELINE_INCONSISTENT" not in codes and codes[0] in ("STRAGGLER", "NODE_STRAGGLER")
    assert json.dumps([w for w in analysis.cross_rank.inconsistent]) == "[]"
