"""The flight recorder on real ranks: a rank SIGKILLed between two flushes leaves its last
rows in its ring, and the report reads them back.

One killed run (the C++ hooks' way, a ring of 5,000 rows) serves CI: the ring's rows against
the stream's, the recovered rows in the report, and a copy of the run with its ring cut
short. The same on the `dist.*` wrappers' way is heavy (make bench)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import psutil
import pytest
from ring_match import assert_ring_matches_stream

from conftest import DDP_TRAIN, scalescope, start_scalescope
from scalescope.events import Kind, load_run
from scalescope.events.files import events_path, ring_path
from scalescope.events.flight_ring import RingError, file_size, read_rank_ring
from scalescope.events.reader import read_event_stream
from scalescope.events.ring_rows import missing_rows
from scalescope.events.schema import ROW_FIELDS
from scalescope.launch.run.runner import RunSpec, rank_argv
from scalescope.probe.install import WAY_VARIABLE

RING_ROWS = 5000


def _rank_process(launcher: int, rank: int) -> psutil.Process:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for p in psutil.Process(launcher).children(recursive=True):
            try:
                if p.environ().get("RANK") == str(rank) and "bootstrap" in " ".join(p.cmdline()):
                    return p
            except psutil.Error:
                continue
        time.sleep(0.2)
    raise AssertionError(f"rank {rank}'s process never appeared")


def _wait_for_rows(run_dir: Path, rows: int) -> None:
    """Until rank 1's ring has taken ``rows`` rows (a file just made may not be sized yet)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            ring = read_rank_ring(run_dir, 1)
        except RingError:
            ring = None
        if ring is not None and ring.written >= rows:
            return
        time.sleep(0.2)
    raise AssertionError(f"rank 1's ring never took {rows} rows")


def _stop_between_flushes(rank: psutil.Process, run_dir: Path) -> list[tuple]:
    """SIGSTOP the rank at a moment its ring holds rows its stream does not (a flush just
    before the stop may leave none: go on and stop it again); the ring's rows at that moment."""
    for _ in range(50):
        time.sleep(0.3)
        rank.send_signal(signal.SIGSTOP)
        ring = read_rank_ring(run_dir, 1)
        written = read_event_stream(events_path(run_dir, 1)).table
        if ring is not None and written.num_rows and missing_rows(ring, written):
            return ring.rows()
        rank.send_signal(signal.SIGCONT)
    raise AssertionError("the ring never held a row the stream did not")


def kill_between_flushes(tmp: Path, way: str = "") -> tuple[Path, list[tuple]]:
    """A 2-rank DDP run whose rank 1 is SIGKILLed between two flushes: the run directory and
    rank 1's ring rows at the kill."""
    saved = os.environ.get(WAY_VARIABLE)
    os.environ[WAY_VARIABLE] = way
    try:
        proc = start_scalescope(
            "run", "-n", "2", "--run-dir", "run", "--no-report", "--ring-rows", str(RING_ROWS),
            str(DDP_TRAIN), "--steps", "5000", "--sleep-rank", "1", "--sleep-s", "0.02",
            cwd=tmp,
        )  # fmt: skip
    finally:
        if saved is None:
            del os.environ[WAY_VARIABLE]
        else:
            os.environ[WAY_VARIABLE] = saved
    run_dir = tmp / "run"
    rank1 = _rank_process(proc.pid, 1)
    _wait_for_rows(run_dir, 200)
    ring_rows = _stop_between_flushes(rank1, run_dir)
    os.kill(rank1.pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    return run_dir, ring_rows


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> tuple[Path, list[tuple]]:
    return kill_between_flushes(tmp_path_factory.mktemp("killed"))


def _check_ring_against_stream(run_dir: Path, ring_rows: list[tuple]) -> list[tuple]:
    """The ring's rows are the stream's on every step both hold whole (at the default
    ``--record summary``, its calls those of the stream's summaries past the first window);
    the stream's rows."""
    stream = read_event_stream(events_path(run_dir, 1)).table.to_pylist()
    full = [tuple(r[c] for c in ROW_FIELDS) for r in stream]
    shared = range(min(r[0] for r in ring_rows), max(r[0] for r in full))
    assert len(shared) >= 5
    assert any(r[1] == Kind.SUMMARY and r[0] in shared for r in full), "no summarised step"
    assert_ring_matches_stream(ring_rows, full, shared)
    assert {r[2] for r in ring_rows if r[1] == Kind.COLLECTIVE} >= {"all_reduce"}
    return full


def test_a_sigkilled_ranks_ring_holds_its_rows_and_the_report_recovers_them(killed):
    run_dir, ring_rows = killed
    assert ring_path(run_dir, 1).stat().st_size == file_size(RING_ROWS)
    assert not ring_path(run_dir, 0).exists(), "rank 0 ended by itself: its stream has all"
    full = _check_ring_against_stream(run_dir, ring_rows)
    run = load_run(run_dir)
    assert run.meta.ranks["1"].status == "killed"
    ended = max(r[0] for r in full if r[1] == Kind.STEP)
    new = [r for r in ring_rows if r[0] > ended and r not in set(full)]
    steps = sorted({r[0] for r in new})
    span = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    note = f"rank 1: {len(new)} rows recovered from its flight recorder ({span})"
    assert note in run.problems
    ev = run.events
    mine = (ev.rank == 1) & (ev.kind == Kind.PHASE)
    assert int(ev.step[mine].max()) == max(r[0] for r in ring_rows if r[1] == Kind.PHASE)
    assert not any("recovered" in p for p in run.problems if p.startswith("rank 0"))
    report = scalescope("report", run_dir, cwd=run_dir.parent)
    assert report.returncode == 0, report.stderr[-2000:]
    assert note in report.stdout + report.stderr


@pytest.mark.heavy
def test_on_the_wrappers_way_too(tmp_path):
    """The Python wrappers hand each row to the ring at its completion (the C++ hooks' rows
    are taken at each step's end and by the watch thread)."""
    run_dir, ring_rows = kill_between_flushes(tmp_path, "wrappers")
    _check_ring_against_stream(run_dir, ring_rows)


def test_a_damaged_ring_is_a_note_and_the_report_goes_on(killed, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(killed[0], run_dir)
    raw = ring_path(run_dir, 1).read_bytes()
    ring_path(run_dir, 1).write_bytes(raw[:1000])  # cut short
    run = load_run(run_dir)
    assert any(
        p.startswith("rank 1: flight recorder not read (rank-00001.ring: 1000 bytes")
        for p in run.problems
    ), run.problems
    assert len(run.events) > 0
    report = scalescope("report", "run", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "flight recorder not read" in report.stdout + report.stderr


def test_a_negative_ring_size_is_refused_before_any_rank_starts(cli_in_process, tmp_path):
    proc = cli_in_process("run", "-n", "2", "--ring-rows", "-1", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "--ring-rows" in proc.stderr and not (tmp_path / "scalescope_runs").exists()


def test_the_ring_size_reaches_the_ranks(tmp_path):
    argv = rank_argv(RunSpec(target=str(DDP_TRAIN), ring_rows=100), tmp_path)
    assert argv[argv.index("--ring-rows") + 1] == "100"
    assert "--ring-rows" not in rank_argv(RunSpec(target=str(DDP_TRAIN)), tmp_path)
