"""analyze_run on whole runs: facts, rank outcomes, missing/truncated files, probe off."""

from __future__ import annotations

import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import (
    batches_by_step,
    expected_phases,
    expected_throughput,
    make_run,
    synth_rank,
)

from scalescope.events import RankMeta

WARMUP = 1
STEPS = 6


def _approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=1e-12)


def _done(rank: int, **kwargs) -> RankMeta:
    fields = {"hostname": "node-a", "status": "completed", "exit_code": 0, "steps": STEPS}
    return RankMeta(rank=rank, **(fields | kwargs))


def test_run_facts(tmp_path):
    ranks = [synth_rank(r, STEPS, warmup_steps=WARMUP) for r in range(2)]
    run = make_run(
        tmp_path,
        {r.rank: [r.rows] for r in ranks},
        world_size=2,
        warmup_steps=WARMUP,
        rank_files={0: _done(0), 1: _done(1)},
    )
    a = analysed(run)
    assert (a.run_id, a.workload, a.world_size, a.nproc_per_node) == ("test-run", "script", 2, 2)
    assert a.hostnames == ("node-a",)
    assert a.status == "completed"
    assert a.command == ("scalescope", "run", "train.py")
    assert a.duration_s == _approx(12.5)
    assert a.probe and a.warmup_steps == WARMUP
    assert [(r.rank, r.status, r.exit_code, r.steps) for r in a.ranks] == [
        (0, "completed", 0, STEPS),
        (1, "completed", 0, STEPS),
    ]
    assert a.failed_ranks == ()
    assert a.problems == ()


def test_missing_rank_file_is_listed_and_rest_analysed(tmp_path):
    ranks = [synth_rank(r, STEPS, warmup_steps=WARMUP) for r in range(3)]
    rows = {r.rank: [r.rows] for r in ranks[:2]}  # rank 2 wrote nothing
    a = analysed(make_run(tmp_path, rows, world_size=3, warmup_steps=WARMUP))
    assert len(a.problems) == 1
    assert "rank 2" in a.problems[0] and "missing" in a.problems[0]
    assert [r.rank for r in a.steps.ranks] == [0, 1]
    for synth, got in zip(ranks, a.steps.ranks, strict=False):
        want = expected_phases(synth, WARMUP)
        assert got.phases[-1].mean_ms == _approx(want["step"]["mean_ms"])
    assert a.collectives.num_ranks == 2
    assert a.ranks[2].status == "unknown"  # no meta of rank 2 either


def test_truncated_rank_file_keeps_complete_batches(tmp_path):
    ranks = [synth_rank(r, STEPS, warmup_steps=WARMUP) for r in range(2)]
    rows = {r.rank: batches_by_step(r.rows, 2) for r in ranks}  # batches: steps 0-1, 2-3, 4-5
    run = make_run(tmp_path, rows, world_size=2, warmup_steps=WARMUP, truncate_bytes={1: 200})
    a = analysed(run)
    assert len(a.problems) == 1
    assert "rank 1" in a.problems[0] and "truncated" in a.problems[0]
    full, cut = a.steps.ranks
    assert full.num_steps == STEPS - WARMUP
    assert (cut.num_steps, cut.last_step) == (3, 3)  # the last batch (steps 4, 5) was lost
    want = expected_phases(ranks[1], WARMUP, end_step=4)
    for p in cut.phases:
        assert p.mean_ms == _approx(want[p.phase]["mean_ms"])
        assert p.p95_ms == _approx(want[p.phase]["p95_ms"])
    samples, span_s = expected_throughput(ranks[1], WARMUP, end_step=4)
    assert (cut.samples, cut.span_s) == (samples, _approx(span_s))
    total = full.samples + samples
    longest = max(full.span_s, span_s)
    assert a.steps.samples_per_s == _approx(total / longest)


def test_probe_off_run_abstains(tmp_path):
    launcher = {0: _done(0), 1: _done(1)}
    a = analysed(make_run(tmp_path, {}, world_size=2, probe=False, launcher_ranks=launcher))
    assert not a.probe
    assert a.steps is None and a.collectives is None
    assert a.problems == ()  # no event files is expected, not a problem
    assert [r.status for r in a.ranks] == ["completed", "completed"]


def test_failed_rank_takes_the_final_word(tmp_path):
    """Rank 1 was killed: its own file still says running; the launcher knows better (its
    entry is the rank's file with what the launcher saw, as finish_meta writes it)."""
    error = "Traceback (most recent call last):\n  File train.py\nRuntimeError: boom"
    synth = synth_rank(0, STEPS, warmup_steps=WARMUP)
    run = make_run(
        tmp_path,
        {0: [synth.rows]},
        world_size=2,
        warmup_steps=WARMUP,
        status="failed",
        rank_files={0: _done(0), 1: _done(1, status="running", exit_code=None, steps=2)},
        launcher_ranks={1: _done(1, status="failed", exit_code=1, error=error, steps=2)},
    )
    a = analysed(run)
    assert a.status == "failed"
    r1 = a.ranks[1]
    assert (r1.status, r1.exit_code, r1.error) == ("failed", 1, error)
    assert r1.hostname == "node-a"
    assert a.failed_ranks == (r1,)
    assert "rank 1" in a.problems[0]  # its event file is missing
    assert [r.rank for r in a.steps.ranks] == [0]


@pytest.mark.parametrize(
    ("rank1", "status"),
    [("interrupted", "interrupted"), ("failed", "failed"), ("running", "running")],
)
def test_a_launcher_that_died_leaves_the_status_to_the_ranks(tmp_path, rank1, status):
    """run.json says running; when every rank recorded its end, the run's status is theirs."""
    ranks = [synth_rank(r, STEPS, warmup_steps=WARMUP) for r in range(2)]
    run = make_run(
        tmp_path,
        {r.rank: [r.rows] for r in ranks},
        world_size=2,
        status="running",
        rank_files={0: _done(0, status="interrupted"), 1: _done(1, status=rank1)},
    )
    assert analysed(run).status == status
    said = "but every rank recorded its end" in run.problems[0]
    assert run.problems[0].startswith("run.json says running") and said == (rank1 != "running")
