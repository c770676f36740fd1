"""Bad input and bad endings of `scalescope run`: each gets a clear error and loses nothing."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from conftest import DDP_TRAIN, start_scalescope
from scalescope.events import Kind, load_run


def _wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def _start_long_run(tmp_path: Path, sleep_rank: int):
    """A 2-rank run of thousands of steps, returned once it has done a few."""
    ready = tmp_path / "ready"
    proc = start_scalescope(
        "run", "-n", "2", "--run-dir", "run", "--no-report", str(DDP_TRAIN), "--steps", "5000",
        "--sleep-rank", str(sleep_rank), "--sleep-s", "0.02", "--ready-file", str(ready),
        cwd=tmp_path,
    )  # fmt: skip
    _wait_for(ready)
    return proc


def _steps(run, rank: int) -> list[int]:
    ev = run.events
    return ev.step[(ev.rank == rank) & (ev.kind == Kind.STEP)].tolist()


def test_missing_script(cli_in_process):
    proc = cli_in_process("run", "-n", "2", "no_such_script.py")
    assert proc.returncode == 2
    assert "script not found: no_such_script.py" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_module(cli_in_process):
    proc = cli_in_process("run", "-n", "2", "-m", "no_such_module_xyz")
    assert proc.returncode == 2
    assert "no module named 'no_such_module_xyz'" in proc.stderr


def test_unknown_option(cli_in_process):
    proc = cli_in_process("run", "--bogus", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "unknown option --bogus" in proc.stderr


def test_hang_options_without_the_probe_are_refused(tmp_path):
    """The hang watch reads the probe's live states: --no-probe cannot honour them."""
    from conftest import scalescope_in_process

    for extra in (["--hang-after", "30"], ["--hang-action", "kill"]):
        done = scalescope_in_process("run", "--no-probe", *extra, str(DDP_TRAIN), cwd=tmp_path)
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "need the probe" in lines[0], done.stderr
    assert not (tmp_path / "scalescope_runs").exists()


def test_bad_nproc(cli_in_process):
    proc = cli_in_process("run", "-n", "0", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "nproc-per-node" in proc.stderr


def test_existing_run_dir_is_not_overwritten(cli_in_process, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    proc = cli_in_process("run", "--run-dir", "run", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "already holds a run" in proc.stderr
    assert (tmp_path / "run" / "run.json").read_text() == "{}"


def test_rank_raises_at_step_3(run_cli, tmp_path):
    proc = run_cli(
        "run", "-n", "2", "--run-dir", "run", str(DDP_TRAIN), "--fail-rank", "1", "--fail-step", "3"
    )
    assert proc.returncode == 1
    assert "rank 1 on" in proc.stdout
    assert ": failed, exit code 1, 3 steps done (first to fail)" in proc.stdout
    assert "RuntimeError: deliberate failure on rank 1 at step 3" in proc.stdout
    assert "Throughput and step time" in proc.stdout
    assert "run failed: run" in proc.stderr
    run = load_run(tmp_path / "run")
    assert run.meta.status == "failed"
    failed = run.meta.ranks["1"]
    assert failed.status == "failed" and failed.exit_code == 1
    assert "deliberate failure on rank 1 at step 3" in failed.error
    assert _steps(run, 1) == [0, 1, 2]
    assert _steps(run, 0)[:3] == [0, 1, 2]


def test_sigterm_to_launcher_flushes_and_marks_interrupted(tmp_path):
    proc = _start_long_run(tmp_path, sleep_rank=0)
    time.sleep(1.0)
    ranks = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    run = load_run(tmp_path / "run")
    assert run.meta.status == "interrupted"
    assert run.problems == []
    for rank in (0, 1):
        meta = run.meta.ranks[str(rank)]
        assert meta.status == "interrupted"
        assert "SIGTERM" in meta.error
        recorded = _steps(run, rank)
        assert recorded == list(range(meta.steps)), "every step the rank finished is recorded"
        assert len(recorded) >= 3
    _gone, alive = psutil.wait_procs(ranks, timeout=10)
    assert not alive, f"left running: {[p.pid for p in alive]}"


def test_rank_killed_mid_run_keeps_flushed_steps(tmp_path):
    proc = _start_long_run(tmp_path, sleep_rank=1)
    time.sleep(2.0)
    rank1 = [
        p
        for p in psutil.Process(proc.pid).children(recursive=True)
        if "RANK" in p.environ() and p.environ()["RANK"] == "1"
    ]
    assert rank1, "rank 1 process not found"
    os.kill(rank1[0].pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    run = load_run(tmp_path / "run")
    assert run.meta.status == "failed"
    killed = run.meta.ranks["1"]
    assert killed.status == "killed" and killed.exit_code == -signal.SIGKILL
    assert len(_steps(run, 1)) >= 20, "batches flushed before the kill are kept"


@pytest.mark.heavy
def test_sigterm_ends_ranks_blocked_in_cpp_within_10_s(tmp_path):
    """Both ranks blocked in C++ (rank 0 in all_reduce, rank 1 in broadcast: a mismatch), so
    neither runs its Python SIGTERM handler. Each one's watch thread sees the signal through
    the wakeup fd, flushes and ends the rank 3 s later; torch's agent would wait 30 s."""
    from conftest import SCRIPTS
    from scalescope.events.live_state import read_live_states

    proc = start_scalescope(
        "run", "-n", "2", "--run-dir", "run", "--no-report", "--hang-after", "100",
        str(SCRIPTS / "hang_train.py"), "--mode", "mismatch", "--at", "3", cwd=tmp_path,
    )  # fmt: skip

    def blocked() -> bool:
        states = read_live_states(tmp_path / "run", 2)
        now = time.time()
        return len(states) == 2 and all(
            s.in_collective and now - s.entered_s > 2.0 for s in states.values()
        )

    deadline = time.monotonic() + 120
    while not blocked():
        assert time.monotonic() < deadline, "the ranks never blocked"
        time.sleep(0.2)
    ranks = psutil.Process(proc.pid).children(recursive=True)
    stopped = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    _, alive = psutil.wait_procs(ranks, timeout=max(0.1, 10.0 - (time.monotonic() - stopped)))
    assert not alive, f"still running 10 s after SIGTERM: {alive}"
    run = load_run(tmp_path / "run")
    errors = [run.ranks[rank].error or "" for rank in (0, 1)]
    assert any("blocked in C++" in e for e in errors), errors  # the first to end; the other
    for rank in (0, 1):  # may then see its collective fail ("connection closed by peer")
        meta = run.ranks[rank]
        assert meta.status == "interrupted" and "stopped by SIGTERM" in (meta.error or ""), meta
        assert _steps(run, rank) == list(range(meta.steps)), "every step it recorded kept"
