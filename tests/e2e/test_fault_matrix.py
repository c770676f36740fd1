"""The fault matrix of docs/reliability.md: each fault injected into a real run, what the user
sees, and that nothing recorded before it is lost and no process is left running."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
from recorded_runs import RUNS
from test_hangs import HANG_TRAIN, assert_no_process_left, recorded_steps, start_job, wait_until

from conftest import cli_env, scalescope, scalescope_in_process
from scalescope.events import load_run
from scalescope.events.live_state import read_live_states


def mount_tmpfs(where: Path, options: str) -> str | None:
    """Mount a small tmpfs; the reason it cannot be done here, or None."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return "mounting a tmpfs needs root and mount(8)"
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, f"ss{uuid.uuid4().hex[:6]}", str(where)],
        capture_output=True, text=True,
    )  # fmt: skip
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip()}"


@pytest.fixture
def tmpfs(tmp_path):
    mounted: list[Path] = []

    def make(options: str) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        why = mount_tmpfs(where, options)
        if why:
            pytest.skip(why)
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def kill_launcher_when(proc: subprocess.Popen, run_dir: Path, ready) -> list[int]:
    """SIGKILL the launcher once ``ready(states)`` holds; the rank pids it had."""
    wait_until(lambda: ready(read_live_states(run_dir, 2)), what="the ranks to get going")
    pids = [s.pid for s in read_live_states(run_dir, 2).values()]
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    return pids


def wait_gone(pids: list[int], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
            return
        time.sleep(0.2)
    assert_no_process_left(pids)


def test_launcher_sigkilled_mid_run_leaves_no_rank(tmp_path):
    proc = start_job(
        "run", "-n", "2", "--run-dir", "run", "--no-report", HANG_TRAIN, "--mode", "none",
        "--steps", "100000", cwd=tmp_path,
    )  # fmt: skip
    run_dir = tmp_path / "run"
    pids = kill_launcher_when(
        proc, run_dir, lambda s: len(s) == 2 and all(x.steps_done >= 10 for x in s.values())
    )
    wait_gone(pids)
    run = load_run(run_dir)
    assert any("run.json says running, but every rank recorded its end" in p for p in run.problems)
    assert run.meta.status == "interrupted"
    for rank in (0, 1):
        meta = run.ranks[rank]
        assert meta.status == "interrupted" and meta.error.startswith("stopped by SIGTERM")
        assert recorded_steps(run, rank) == list(range(meta.steps)) and meta.steps >= 10


def test_launcher_sigkilled_while_ranks_block_in_a_collective(tmp_path):
    """Both ranks wait in C++ (a collective mismatch): their SIGTERM handlers cannot run, so
    the probe's watch thread records the end and exits them."""
    proc = start_job(
        "run", "-n", "2", "--run-dir", "run", "--hang-after", "3", "--no-report", HANG_TRAIN,
        "--mode", "mismatch", cwd=tmp_path,
    )  # fmt: skip
    run_dir = tmp_path / "run"
    pids = kill_launcher_when(proc, run_dir, lambda _s: (run_dir / "hang.json").exists())
    wait_gone(pids)
    run = load_run(run_dir)
    # the first rank out can only be ended by its watch thread; its peer's collective then
    # fails, and that rank's own SIGTERM handler runs
    assert any("its launcher died" in run.ranks[r].error for r in (0, 1))
    for rank in (0, 1):
        meta = run.ranks[rank]
        assert meta.status == "interrupted" and meta.error.startswith("stopped by SIGTERM")
        assert (
            recorded_steps(run, rank) == list(range(meta.steps)) and meta.steps == 7
        )  # the mismatch follows step 6
    hang = json.loads((run_dir / "hang.json").read_text())
    assert hang["verdicts"][0]["kind"] == "mismatch"


@pytest.mark.heavy
def test_disk_full_keeps_what_was_written(tmpfs):
    where = tmpfs("size=400k")
    proc = scalescope(
        "run", "-n", "2", "--run-dir", where / "run", "--no-report", HANG_TRAIN, "--mode",
        "none", "--steps", "400", cwd=where.parent,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "could not be updated: No space left on device" in proc.stderr
    report = scalescope("report", where / "run", cwd=where.parent)
    assert report.returncode == 0 and "Traceback" not in report.stderr
    run = load_run(where / "run")
    assert any("truncated after batch" in p for p in run.problems)
    for rank in (0, 1):
        steps = recorded_steps(run, rank)
        assert len(steps) >= 20 and steps == list(range(len(steps)))


def test_read_only_run_directory_is_one_line(tmpfs):
    where = tmpfs("size=1m,ro")
    proc = scalescope_in_process(
        "run", "-n", "2", "--run-dir", where / "run", HANG_TRAIN, cwd=where.parent
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: cannot write the run directory {where / 'run'}: Read-only file system"
    )


FINISHED = RUNS / "straggler_data_2" / "run"
"""A real 2-rank run recorded once (tests/data/runs): 24 steps, two event batches per rank."""


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "flipped"])
def test_damaged_event_file_before_report(tmp_path, damage):
    run_dir = tmp_path / "run"
    shutil.copytree(FINISHED, run_dir)
    whole = load_run(FINISHED)
    path = run_dir / "events" / "rank-00001.arrows"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    if damage == "truncated":
        data = data[:middle]
    elif damage == "zeroed":  # what a crash can leave: blocks allocated, never written
        data[middle:] = bytes(len(data) - middle)
    else:
        for i in range(middle, middle + 64, 7):
            data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    proc = scalescope_in_process("report", run_dir, cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    run = load_run(run_dir)
    steps = recorded_steps(run, 1)
    assert steps == list(range(len(steps))), "the steps before the damage are all kept"
    assert recorded_steps(run, 0) == recorded_steps(whole, 0), "the other rank loses nothing"
    if damage != "flipped":  # a flip inside a batch's values goes unseen: no checksums
        assert any("rank 1:" in p for p in run.problems)
        assert "Problems with the recorded data" in proc.stdout
        assert len(steps) < len(recorded_steps(whole, 1))


@pytest.mark.heavy
def test_peer_node_unreachable_mid_run(tmp_path):
    """Two nodes in two network namespaces; node 1's link goes down after 10 steps: both
    ranks wait in the same all_reduce forever. Each node's launcher sees the hang."""
    from test_launch_cluster import CLI, free_port

    from conftest import netns_unavailable, veth_hosts

    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with veth_hosts("10.211.8", "sh") as hosts:
        endpoint = f"{hosts[0][2]}:{free_port()}"
        procs = [
            subprocess.Popen(
                [
                    "ip", "netns", "exec", ns, "env", f"GLOO_SOCKET_IFNAME={dev}", *CLI, "run",
                    "--nnodes", "2", "--node-rank", str(node), "-n", "1", "--rdzv-backend",
                    "static", "--rdzv-endpoint", endpoint, "--local-addr", addr, "--run-dir",
                    "run", "--no-report", "--hang-after", "3", "--hang-action", "kill",
                    str(HANG_TRAIN), "--mode", "none", "--steps", "100000",
                ],
                cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True,
            )
            for node, (ns, dev, addr) in enumerate(hosts)
        ]  # fmt: skip
        run_dir = tmp_path / "run"
        wait_until(
            lambda: (
                all(s.steps_done >= 10 for s in read_live_states(run_dir, 2).values())
                and len(read_live_states(run_dir, 2)) == 2
            ),
            what="10 steps on both nodes",
        )
        pids = [s.pid for s in read_live_states(run_dir, 2).values()]
        subprocess.run(["ip", "-n", hosts[1][0], "link", "set", hosts[1][1], "down"], check=True)
        outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outputs
    said = [line for line in outputs[0][1].splitlines() if "HANG" in line or "wait" in line]
    assert "all wait in all_reduce" in outputs[0][1], f"node 0 said: {said}"
    hang = json.loads((run_dir / "hang.json").read_text())
    assert [(v["kind"], v["waiting"]) for v in hang["verdicts"]] == [("all_waiting", [0, 1])]
    run = load_run(run_dir)
    for r in hang["ranks"]:
        assert recorded_steps(run, r["rank"]) == list(range(r["steps_done"]))
        assert r["steps_done"] >= 10
    assert_no_process_left(pids)
