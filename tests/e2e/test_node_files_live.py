"""Node files written live by the node's relay (launch/run/node_files.py, issue 50 item 2):
a real 2-rank run's node files hold exactly what ``build_run_node_files`` computes from the
same run's rank files afterwards; a rank killed mid-run leaves node files of what it
recorded, which ``report`` analyses (rank files removed but one) with the same steps; under
mpirun, the task that relays its node writes them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_env import cli_env

from conftest import DDP_TRAIN, scalescope
from scalescope.events.files import events_path
from scalescope.events.live_state import read_live_states
from scalescope.events.node_file import iter_node_tables, node_paths, read_manifest
from scalescope.events.node_stats import build_run_node_files
from scalescope.events.reader import read_event_stream
from scalescope.events.run import load_meta
from scalescope.launch.run.node_files import WINDOW_ENV

WINDOW = 50
STEPS = 120


def windowed_env() -> dict[str, str]:
    return cli_env() | {WINDOW_ENV: str(WINDOW)}


def assert_same_as_built(run_dir: Path, tmp: Path) -> list[int]:
    """The live node files equal, window by window and row by row, those built afterwards
    from the run's rank files; the windows."""
    live = read_manifest(run_dir)
    built = build_run_node_files(run_dir, WINDOW, out=tmp / "built")
    assert live.window_steps == WINDOW and live.world_size == built.world_size
    assert [(n.host, n.ranks) for n in live.nodes] == [(n.host, n.ranks) for n in built.nodes]
    node_paths(run_dir, live, "steps")  # every file the manifest names is there
    for table in ("steps", "colls"):
        ours = {(w, n): t for w, n, t in iter_node_tables(run_dir, live, table)}
        theirs = {(w, n): t for w, n, t in iter_node_tables(tmp / "built", built, table)}
        for key in set(theirs) - set(ours):  # a window past every recorded step: empty
            assert theirs[key].num_rows == 0, key
        for key, data in ours.items():
            assert data.equals(theirs[key]), (table, key)
    return live.windows


@pytest.mark.heavy
def test_a_run_writes_the_node_files_its_rank_files_give(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", run_dir,
         "--no-report", DDP_TRAIN, "--steps", str(STEPS)], cwd=tmp_path, env=windowed_env(),
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert assert_same_as_built(run_dir, tmp_path) == [0, 50, 100]
    steps = [t for _, _, t in iter_node_tables(run_dir, read_manifest(run_dir), "steps")]
    assert sum(t.num_rows for t in steps) == 2 * STEPS


def recorded_steps(run_dir: Path, rank: int, warmup: int) -> int:
    t = read_event_stream(events_path(run_dir, rank)).table
    kind, step = t.column("kind").to_numpy(), t.column("step").to_numpy()
    return int(((kind == 2) & (step >= warmup)).sum())


def test_a_killed_rank_leaves_node_files_of_what_it_recorded(tmp_path):
    """Rank 1 SIGKILLed past step 70: the node files hold its steps up to its last flush and
    rank 0's up to its end; the report from node files (the rank files removed) counts the
    steps the rank files held."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", run_dir,
         "--no-report", DDP_TRAIN, "--steps", "100000"], cwd=tmp_path, env=windowed_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            state = read_live_states(run_dir, 2).get(1)
            if state is not None and state.steps_done >= 70 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None and state is not None, proc.communicate()[1][-3000:]
        os.kill(state.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode != 0, err[-3000:]
    windows = assert_same_as_built(run_dir, tmp_path)
    assert windows[:2] == [0, 50], windows
    manifest = read_manifest(run_dir)
    per_rank: dict[int, int] = {}
    for _, _, t in iter_node_tables(run_dir, manifest, "steps"):
        for rank in t.column("rank").to_pylist():
            per_rank[rank] = per_rank.get(rank, 0) + 1
    warmup = load_meta(run_dir).warmup_steps
    counted = [recorded_steps(run_dir, r, warmup) for r in (0, 1)]
    assert 40 <= per_rank[1] < 100_000, per_rank  # up to its last flush (every 20 steps)
    for rank in (0, 1):  # most rank files gone: the node files' path (a sampled run's)
        (run_dir / "events" / f"rank-{rank:05d}.arrows").unlink()
    report = scalescope("report", run_dir, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["analysed_from"] == "node files" and doc["rank_files"] == []
    assert doc["rank_steps"] == {"min": min(counted), "max": max(counted)}, (doc, counted)


@pytest.mark.heavy
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed")
def test_under_mpirun_the_relaying_task_writes_the_node_files(tmp_path):
    from test_launch_cluster import free_port

    port = free_port()
    script = Path(sys.executable).with_name("scalescope")
    proc = subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x",
         "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={port}", "-x", WINDOW_ENV, str(script),
         "run", "--oversubscribe", "--run-dir", "run", "--no-report", str(DDP_TRAIN),
         "--steps", str(STEPS)], cwd=tmp_path, env=windowed_env(), capture_output=True,
        text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert assert_same_as_built(tmp_path / "run", tmp_path) == [0, 50, 100]


def test_a_bad_window_refuses_the_run_in_one_line(tmp_path, monkeypatch):
    from conftest import scalescope_in_process

    monkeypatch.setenv(WINDOW_ENV, "0")
    proc = scalescope_in_process("run", "-n", "2", "--run-dir", "run", "--no-report", DDP_TRAIN,
                                 cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {WINDOW_ENV}='0': expected a whole number of steps >= 1"
    assert not (tmp_path / "run").exists()


@pytest.mark.heavy
def test_two_srun_nodes_write_their_files_and_one_manifest(tmp_path):
    """srun's variables for 2 nodes x 2 tasks, a host name per node (unshare --uts): each
    node's relaying task writes its node's files, and the manifest names both nodes."""
    from test_launch_cluster import free_port, two_node_task, unique_job

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("a host name per node needs unshare --uts as root")
    port, job = free_port(), unique_job()
    argv = [sys.executable, "-m", "scalescope.cli", "run", "--oversubscribe", "--run-dir", "run",
            "--no-report", str(DDP_TRAIN), "--steps", str(STEPS)]  # fmt: skip
    procs = [two_node_task(rank, job, port, argv, cwd=tmp_path, env={WINDOW_ENV: str(WINDOW)})
             for rank in range(4)]  # fmt: skip
    errors = [p.communicate(timeout=240)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    assert assert_same_as_built(tmp_path / "run", tmp_path) == [0, 50, 100]
    nodes = read_manifest(tmp_path / "run").nodes
    assert [(n.node, n.host, n.ranks) for n in nodes] == [
        (0, "nodea", [0, 1]),
        (1, "nodeb", [2, 3]),
    ]
