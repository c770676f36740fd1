"""`scalescope run -n 32 --oversubscribe` of a tiny DDP script on a small machine: the run
completes, every rank records its meta and events, and `report --json` keeps every rank.
Plumbing only, no times.

32 ranks, issue 29's count: on a 2-core machine each rank spends ~4 s of CPU starting
(torch's import, the process group, DDP) and holds ~400 MiB; the run took 80 s alone and
12.5 GiB of memory at its peak (2026-11-26), inside this test's 280 s limit.
``SCALESCOPE_TEST_MANY_RANKS`` sets another count (24 where memory is short)."""

from __future__ import annotations

import os

import pytest

from conftest import DDP_TRAIN, run_then_report
from scalescope.events import load_run

RANKS = int(os.environ.get("SCALESCOPE_TEST_MANY_RANKS", "32"))
STEPS = 2


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("many_ranks")
    _proc, doc = run_then_report(
        RANKS,
        "--oversubscribe",
        DDP_TRAIN,
        "--steps",
        STEPS,
        cwd=tmp,
        timeout=280,
        report_timeout=120,
    )
    return tmp / "run", doc


def test_every_rank_completes_and_records_its_files(many):
    run_dir, _ = many
    assert len(list((run_dir / "ranks").glob("rank-*.json"))) == RANKS
    assert len(list((run_dir / "events").glob("rank-*.arrows"))) == RANKS
    run = load_run(run_dir)
    assert run.meta.status == "completed" and run.meta.world_size == RANKS
    assert not [p for p in run.problems if "missing" in p], run.problems
    assert sorted(run.ranks) == list(range(RANKS))
    assert {m.status for m in run.ranks.values()} == {"completed"}
    assert run.events.ranks() == list(range(RANKS))


def test_the_json_report_keeps_every_rank(many):
    _, report = many
    assert report["world_size"] == RANKS
    assert len(report["ranks"]) == RANKS
    assert len(report["steps"]["ranks"]) == RANKS
    cross = report["cross_rank"]
    assert len(cross["ranks"]) == RANKS
    assert cross["matched_instances"] > 0
