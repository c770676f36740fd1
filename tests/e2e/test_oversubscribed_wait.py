"""`scalescope run -n 8 --oversubscribe` of a real DDP script on a small machine: every rank
records its run-queue wait, and the diagnosis names the oversubscription first, measured by
that wait, not the communication the time-slicing shows as, and a rank that sleeps among
the time-sliced ranks is still named. One run serves all three tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DDP_TRAIN, run_then_report
from scalescope.events import load_run

RANKS = 8

pytestmark = [
    pytest.mark.skipif(
        not Path("/proc/self/schedstat").is_file(), reason="no /proc schedstat (not Linux)"
    ),
    pytest.mark.heavy,
]


SLEEPER, SLEEP_S = 5, 0.05


@pytest.fixture(scope="module")
def oversubscribed(tmp_path_factory):
    """One oversubscribed run serves every test here: 8 ranks time-sliced on the machine's
    cores, and rank 5 sleeping 50 ms per step (the straggler the last test looks for; 8 ranks,
    since the rule needs them to tell a sleeper from the time-slicing)."""
    tmp = tmp_path_factory.mktemp("oversubscribed")
    _proc, doc = run_then_report(
        RANKS, "--oversubscribe", DDP_TRAIN, "--steps", 12, "--sleep-rank", SLEEPER,
        "--sleep-s", SLEEP_S, cwd=tmp, timeout=180,
    )  # fmt: skip
    return load_run(tmp / "run"), doc


def test_every_rank_records_its_run_queue_wait(oversubscribed):
    run, _ = oversubscribed
    assert sorted(run.ranks) == list(range(RANKS))
    for meta in run.ranks.values():
        assert meta.status == "completed"
        assert meta.runqueue_wait_s is not None and meta.runqueue_wait_s >= 0
        assert meta.involuntary_switches is not None


def test_the_oversubscription_is_the_first_finding_measured_by_the_wait(oversubscribed):
    run, doc = oversubscribed
    diagnosis = doc["diagnosis"]
    first = diagnosis["findings"][0]
    assert first["code"] == "OVERSUBSCRIBED", [f["code"] for f in diagnosis["findings"]]
    assert first["basis"].startswith("measured: run-queue wait")
    names = [e["name"] for e in first["evidence"]]
    assert any(n.startswith("run-queue wait per step") for n in names)
    assert any(n.startswith("involuntary context switches per rank") for n in names)
    assert any(n == f"threads of the {RANKS} ranks on {run.ranks[0].hostname}" for n in names)
    assert diagnosis["verdict"].startswith("CPU placement")
    comm = [f for f in diagnosis["findings"] if f["code"].startswith("COMM_")]
    assert all(f["level"] == "info" for f in comm), "time-slicing, not a communication warning"


def test_a_sleeper_among_time_sliced_ranks_is_still_named(oversubscribed):
    """Its delay is larger than the scheduling noise: the straggler is named, and stays a
    warning, since its own CPU facts clear the shared cores (it sleeps, it is not slowed)."""
    _, doc = oversubscribed
    findings = doc["diagnosis"]["findings"]
    assert findings[0]["code"] == "OVERSUBSCRIBED", [f["code"] for f in findings]
    straggler = next(f for f in findings if f["code"] == "STRAGGLER")
    assert straggler["rank"] == SLEEPER and straggler["level"] == "warning"
    assert doc["cross_rank"]["straggler"]["rank"] == SLEEPER
    assert "it does more there or waits there" in straggler["remedies"][0]
