"""`scalescope run -n 4 --oversubscribe` of a tiny DDP script on a 2-core machine: the run
completes, every rank records its meta and events, and `report --json` keeps every rank.
Plumbing only, no times.

4 ranks, two per core: the launcher, the rendezvous, the per-rank files and the report's
cross-rank matching at more ranks than cores, for ~35 s of CPU. Issue 29's 32 ranks (80 s
alone and 12.5 GiB at its peak, 2026-11-26) run the same checks in `make bench`
(benchmarks/live/test_many_ranks_32.py); ``SCALESCOPE_TEST_MANY_RANKS`` sets another count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import DDP_TRAIN, run_then_report
from scalescope.events import load_run

RANKS = int(os.environ.get("SCALESCOPE_TEST_MANY_RANKS", "4"))
STEPS = 2


def run_many(tmp: Path, ranks: int, timeout: float = 280) -> tuple[Path, dict]:
    """``scalescope run -n RANKS --oversubscribe`` of DDP_TRAIN, then ``report --json``."""
    _proc, doc = run_then_report(
        ranks, "--oversubscribe", DDP_TRAIN, "--steps", STEPS, cwd=tmp, timeout=timeout,
        report_timeout=120,
    )  # fmt: skip
    return tmp / "run", doc


def check_every_rank_recorded(run_dir: Path, ranks: int) -> None:
    assert len(list((run_dir / "ranks").glob("rank-*.json"))) == ranks
    assert len(list((run_dir / "events").glob("rank-*.arrows"))) == ranks
    run = load_run(run_dir)
    assert run.meta.status == "completed" and run.meta.world_size == ranks
    assert not [p for p in run.problems if "missing" in p], run.problems
    assert sorted(run.ranks) == list(range(ranks))
    assert {m.status for m in run.ranks.values()} == {"completed"}
    assert run.events.ranks() == list(range(ranks))


def check_report_keeps_every_rank(report: dict, ranks: int) -> None:
    assert report["world_size"] == ranks
    assert len(report["ranks"]) == ranks
    assert len(report["steps"]["ranks"]) == ranks
    cross = report["cross_rank"]
    assert len(cross["ranks"]) == ranks
    assert cross["matched_instances"] > 0


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    return run_many(tmp_path_factory.mktemp("many_ranks"), RANKS)


def test_every_rank_completes_and_records_its_files(many):
    check_every_rank_recorded(many[0], RANKS)


def test_the_json_report_keeps_every_rank(many):
    check_report_keeps_every_rank(many[1], RANKS)
