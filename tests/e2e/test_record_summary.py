"""`scalescope run --record summary` of a real 2-rank FSDP2 script (gloo, a unit per layer),
beside the same run at `--record full`: the run directory holds at most 2 KB a rank-step;
every step is summarised, and a window step's summary equals its own full rows exactly (and
every step's the full run's calls); the steps are the same, their times alike within the
runs' own spread; the report and its verdict come out, and the what-if names the windows
it replayed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from conftest import SCRIPTS, cli_env
from scalescope.events import Kind, load_run
from scalescope.probe.summary import size_class
from scalescope.probe.windows import WINDOWS_VARIABLE, Windows

FSDP_TRAIN = SCRIPTS / "fsdp_train.py"
STEPS, RANKS = 30, 2
WINDOWS = Windows(first=4, every=10, width=2)
KB = 1024


def record(tmp, level: str):
    run_dir = tmp / level
    env = cli_env() | {WINDOWS_VARIABLE: f"{WINDOWS.first}:{WINDOWS.every}:{WINDOWS.width}"}
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", str(RANKS), "--run-dir", run_dir,
        "--record", level, "--no-report", FSDP_TRAIN, "--steps", str(STEPS), "--units", "layer",
    ]  # fmt: skip
    proc = subprocess.run(
        list(map(str, cmd)), cwd=tmp, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("record")
    return record(tmp, "summary"), record(tmp, "full")


def calls_by_key(ev, rank: int, step: int) -> Counter:
    """(op, size class) -> [calls, bytes] of a rank-step's COLLECTIVE rows."""
    rows = ev.select((ev.kind == int(Kind.COLLECTIVE)) & (ev.rank == rank) & (ev.step == step))
    out: Counter = Counter()
    for name, nbytes in zip(rows.strings("name"), rows.nbytes.tolist(), strict=True):
        out[(name, size_class(nbytes), "calls")] += 1
        out[(name, size_class(nbytes), "bytes")] += nbytes
    return out


def summaries_by_key(ev, rank: int, step: int) -> Counter:
    rows = ev.select((ev.kind == int(Kind.SUMMARY)) & (ev.rank == rank) & (ev.step == step))
    out: Counter = Counter()
    names, klass = rows.strings("name"), rows.seq.tolist()
    for name, k, count, nbytes in zip(names, klass, rows.count.tolist(), rows.nbytes.tolist(),
                                      strict=True):  # fmt: skip
        out[(name, k, "calls")] += count
        out[(name, k, "bytes")] += nbytes
    return out


def test_the_run_directory_holds_at_most_2_kb_a_rank_step(runs):
    summary, full = runs
    size = {d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in runs}
    per_rank_step = {d: size[d] / (RANKS * STEPS) for d in runs}
    assert per_rank_step[summary] <= 2 * KB, per_rank_step
    assert per_rank_step[summary] < per_rank_step[full] / 2, per_rank_step


def test_every_step_is_summarised_and_only_the_windows_in_full(runs):
    ev = load_run(runs[0]).events
    for rank in range(RANKS):
        mine = ev.rank == rank
        summarised = set(ev.step[mine & (ev.kind == int(Kind.SUMMARY))].tolist())
        full = set(ev.step[mine & (ev.kind == int(Kind.COLLECTIVE))].tolist())
        assert set(range(STEPS)) <= summarised
        windows = {s for s in range(STEPS) if WINDOWS.full(s)}
        assert full - {STEPS} == windows  # STEPS: the calls after the loop (destroy)


def test_summaries_equal_the_calls_exactly(runs):
    """A window step's summary against its own rows; every step's against the full run's
    rows of that step (the script issues the same calls each step)."""
    summary, full = (load_run(d).events for d in runs)
    for rank in range(RANKS):
        for step in range(STEPS):
            got = summaries_by_key(summary, rank, step)
            if WINDOWS.full(step):
                assert got == calls_by_key(summary, rank, step), (rank, step)
            assert got == calls_by_key(full, rank, step), (rank, step)


def test_same_steps_and_step_times_within_the_runs_spread(runs):
    summary, full = (load_run(d) for d in runs)

    def step_ms(run, rank):
        ev = run.events
        rows = ev.select((ev.kind == int(Kind.STEP)) & (ev.rank == rank) & (ev.step >= 1))
        return rows.step.tolist(), rows.dur_ns / 1e6

    for rank in range(RANKS):
        (steps_s, ms_s), (steps_f, ms_f) = step_ms(summary, rank), step_ms(full, rank)
        assert steps_s == steps_f == list(range(1, STEPS))
        spread = sum(float(np.subtract(*np.percentile(x, [90, 10]))) for x in (ms_s, ms_f))
        assert abs(float(np.median(ms_s)) - float(np.median(ms_f))) <= spread, (rank, spread)


def test_the_report_and_verdict_come_out_and_the_whatif_names_its_windows(runs, tmp_path):
    cmd = [sys.executable, "-m", "scalescope.cli", "report", runs[0], "--json", tmp_path / "r"]
    proc = subprocess.run(
        list(map(str, cmd)), cwd=tmp_path, env=cli_env(), capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "r").read_text())
    assert report["diagnosis"]["verdict"]["line"]
    windows = report["whatif"]["windows"]
    assert windows and set(windows) <= {s for s in range(1, STEPS) if WINDOWS.full(s)}
    assert "Replayed: steps" in proc.stdout and "recorded as summaries" in proc.stdout
