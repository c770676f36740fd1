"""The flight recorder on real ranks: a rank SIGKILLed between two flushes leaves its last
rows in its ring, and the report reads them back."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from conftest import DDP_TRAIN, scalescope, start_scalescope
from scalescope.events import Kind, load_run
from scalescope.events.files import events_path, ring_path
from scalescope.events.flight_ring import file_size, read_rank_ring
from scalescope.events.reader import read_event_stream
from scalescope.events.ring_rows import missing_rows
from scalescope.launch.run.runner import RunSpec, rank_argv
from scalescope.probe.install import WAY_VARIABLE


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


@pytest.mark.parametrize("way", ["", "wrappers"])
def test_a_sigkilled_rank_leaves_its_last_rows_in_its_ring(tmp_path, monkeypatch, way):
    """Both ways rows reach the ring: the C++ hooks' (taken by the live watch thread) on
    this torch, and the Python wrappers' (each at its completion)."""
    monkeypatch.setenv(WAY_VARIABLE, way)
    run_dir = tmp_path / "run"
    proc = start_scalescope(
        "run", "-n", "2", "--run-dir", "run", "--no-report", str(DDP_TRAIN), "--steps", "5000",
        "--sleep-rank", "1", "--sleep-s", "0.02", cwd=tmp_path,
    )  # fmt: skip
    rank1 = _rank_process(proc.pid, 1)
    while not ring_path(run_dir, 1).exists() or read_rank_ring(run_dir, 1).written < 200:
        time.sleep(0.2)
    ring_rows = _stop_between_flushes(rank1, run_dir)
    os.kill(rank1.pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err

    stream = read_event_stream(events_path(run_dir, 1)).table.to_pylist()
    full = [tuple(r[c] for c in ("step", "kind", "name", "start_ns", "dur_ns", "nbytes",
            "count", "dtype", "group", "seq", "tag", "peer")) for r in stream]  # fmt: skip
    last = max(r[0] for r in full)
    shared = range(min(r[0] for r in ring_rows), last)  # the steps both hold whole
    assert len(shared) >= 5
    for step in shared:
        from_ring = sorted(r for r in ring_rows if r[0] == step)
        assert from_ring == sorted(r for r in full if r[0] == step), f"step {step}"
    assert {r[2] for r in ring_rows if r[1] == Kind.COLLECTIVE} >= {"all_reduce"}

    run = load_run(run_dir)
    assert run.meta.ranks["1"].status == "killed"
    new = [r for r in ring_rows if r not in set(full)]
    steps = sorted({r[0] for r in new})
    span = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    note = f"rank 1: {len(new)} rows recovered from its flight recorder ({span})"
    assert note in run.problems
    ev = run.events
    mine = (ev.rank == 1) & (ev.kind == Kind.PHASE)
    assert int(ev.step[mine].max()) == max(r[0] for r in ring_rows if r[1] == Kind.PHASE)
    assert not any("recovered" in p for p in run.problems if p.startswith("rank 0"))

    report = scalescope("report", "run", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    assert note in report.stdout + report.stderr


def test_a_damaged_ring_is_a_note_and_the_report_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_scalescope(
        "run", "-n", "2", "--run-dir", "run", "--no-report", str(DDP_TRAIN), "--steps", "5000",
        "--sleep-rank", "1", "--sleep-s", "0.02", cwd=tmp_path,
    )  # fmt: skip
    rank1 = _rank_process(proc.pid, 1)
    while not ring_path(run_dir, 1).exists() or read_rank_ring(run_dir, 1).written < 100:
        time.sleep(0.2)
    os.kill(rank1.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
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


def test_the_ring_size_reaches_the_ranks_and_0_writes_none(tmp_path):
    spec = RunSpec(target=str(DDP_TRAIN), ring_rows=100)
    argv = rank_argv(spec, tmp_path)
    assert argv[argv.index("--ring-rows") + 1] == "100"
    assert "--ring-rows" not in rank_argv(RunSpec(target=str(DDP_TRAIN)), tmp_path)
    for rows, size in ((100, file_size(100)), (0, None)):
        run = tmp_path / f"rows-{rows}"
        done = scalescope("run", "-n", "1", "--run-dir", run, "--no-report", "--ring-rows",
                          rows, DDP_TRAIN, "--steps", "3", cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        path = ring_path(run, 0)
        assert (path.stat().st_size if path.exists() else None) == size
