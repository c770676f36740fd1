"""Hangs and stops in worlds another launcher started, one task per rank (srun, mpirun):
the ranks' live states travel through the job's store, task 0's scalescope names the hang;
a stop signal ends every rank within 10 s, its events flushed, its status interrupted."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_hangs import HANG_TRAIN, still_running, wait_until
from test_launch_cluster import slurm_env, unique_job
from torch.distributed import TCPStore

from conftest import cli_env
from scalescope.events import Kind, load_run
from scalescope.events.live_state import read_live_states

CLI = [sys.executable, "-m", "scalescope.cli"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
no_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed")


def rank_pids(run_dir: Path) -> list[int]:
    return [s.pid for s in read_live_states(run_dir, 2).values()]


def gone(pids: list[int]) -> bool:
    return not still_running(pids)


def rank_waits(run_dir: Path, seconds: float, ranks: int = 2) -> bool:
    zero = read_live_states(run_dir, ranks).get(0)
    return bool(zero and zero.in_collective and time.time() - zero.entered_s > seconds)


def srun_tasks(
    tmp_path: Path, job: str, env: dict[str, str] | None = None, options: tuple[str, ...] = ()
) -> list:
    """Two tasks of hang_train.py (rank 1 stops in host work at step 3) as srun starts them,
    with ``options`` to ``run``."""
    return [
        subprocess.Popen(
            [
                *CLI,
                "run",
                *options,
                "--run-dir",
                "run",
                "--hang-after",
                "100",
                "--no-report",
                str(HANG_TRAIN),
                "--mode",
                "host",
                "--at",
                "3",
            ],
            cwd=tmp_path,
            env=slurm_env(rank, 2, "localhost", job) | (env or {}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for rank in (0, 1)
    ]


@pytest.mark.heavy
@no_mpirun
def test_mpirun_hang_is_named_live_through_the_store(tmp_path):
    """Rank 1 sleeps in host work; task 0's scalescope sees it through the store, gets both
    ranks' stacks through their relays, writes hang.json and (kill) stops both ranks."""
    script = Path(sys.executable).with_name("scalescope")
    proc = subprocess.run(
        [*MPIRUN, str(script), "run", "--run-dir", "run", "--hang-after", "4", "--hang-action",
         "kill", "--no-report", str(HANG_TRAIN), "--mode", "host", "--at", "3"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert hang["source"] == "live" and hang["hang_after_s"] == 4.0
    assert hang["idle_s"] < 4.0 + 5.0, "named within 5 s of the threshold"
    [verdict] = hang["verdicts"]
    assert (verdict["kind"], verdict["ranks"], verdict["waiting"]) == ("missing", [1], [0])
    stacks = {r["rank"]: r["stack"] for r in hang["ranks"]}
    assert "hang_train.py" in stacks[0] and "hang_train.py" in stacks[1], "both relays answered"
    assert "HANG: no rank finished" in proc.stderr
    assert gone([r["pid"] for r in hang["ranks"]])


@pytest.mark.heavy
@no_mpirun
def test_sigterm_to_mpirun_ends_every_rank_and_keeps_their_events(tmp_path):
    script = Path(sys.executable).with_name("scalescope")
    proc = subprocess.Popen(
        [*MPIRUN, str(script), "run", "--run-dir", "run", "--no-report", str(HANG_TRAIN),
         "--mode", "host", "--at", "3"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_dir = tmp_path / "run"
    wait_until(lambda: rank_waits(run_dir, 6.0), what="rank 0 waiting 6 s")
    pids = rank_pids(run_dir)
    stopped = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    wait_until(lambda: gone(pids), timeout=10.0, what="every rank gone within 10 s")
    assert time.monotonic() - stopped < 10.0
    run = load_run(run_dir)
    for rank in (0, 1):
        assert run.ranks[rank].status == "interrupted", run.ranks[rank].error
        assert run.ranks[rank].steps == 3
    report = subprocess.run([*CLI, "report", "run", "--json", "r.json"], cwd=tmp_path,
                            env=cli_env(), capture_output=True, text=True, timeout=120)  # fmt: skip
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["hang"]["source"] == "events", report.stderr
    assert doc["diagnosis"]["findings"][0]["code"] == "HANG"


@pytest.mark.heavy
def test_srun_task_whose_rank_blocks_in_cpp_is_ended_after_its_grace(tmp_path):
    """Two tasks as srun starts them. Rank 0 blocks in a gloo all_reduce (C++, where its
    SIGTERM handler never runs) while rank 1 sleeps; SIGTERM to task 0 only: the rank's
    watch thread flushes and ends it 3 s later (its scalescope would 5 s later), recorded
    interrupted with every step."""
    job = unique_job()
    procs = srun_tasks(tmp_path, job)
    run_dir = tmp_path / "run"
    try:
        wait_until(lambda: rank_waits(run_dir, 3.0), what="rank 0 waiting in its all_reduce")
        zero = read_live_states(run_dir, 2)[0].pid
        procs[0].send_signal(signal.SIGTERM)
        procs[0].communicate(timeout=30)
        assert gone([zero])
        run = load_run(run_dir)
        meta = run.ranks[0]
        assert meta.status == "interrupted" and "blocked in C++" in (meta.error or ""), meta
        ev = run.events
        steps = ev.step[(ev.rank == 0) & (ev.kind == Kind.STEP)].tolist()
        assert steps == [0, 1, 2], "the flush asked for before the kill wrote every step"
    finally:
        for p in procs:  # task 1: its rank ends on the SIGTERM its parent's death sends
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=30)


@pytest.mark.heavy
def test_a_stuck_rank_on_another_node_is_named_through_the_store(tmp_path):
    """Two nodes (network namespaces) of 2 ranks each, each node with its own run directory,
    so no file is shared. Rank 3, on node 1, stops in host work; node 0's launcher names it
    through the rendezvous store within the threshold + 5 s, and the stop reaches node 1."""
    from test_launch_cluster import free_port

    from conftest import netns_unavailable, veth_hosts

    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    folders = [tmp_path / "node0", tmp_path / "node1"]
    for folder in folders:
        folder.mkdir()
    with veth_hosts("10.211.9", "sx") as hosts:
        endpoint = f"{hosts[0][2]}:{free_port()}"
        procs = [
            subprocess.Popen(
                [
                    "ip", "netns", "exec", ns, "env", f"GLOO_SOCKET_IFNAME={dev}", *CLI, "run",
                    "--nnodes", "2", "--node-rank", str(node), "-n", "2", "--rdzv-backend",
                    "static", "--rdzv-endpoint", endpoint, "--local-addr", addr, "--run-dir",
                    "run", "--no-report", "--hang-after", "3", "--hang-action", "kill",
                    str(HANG_TRAIN), "--mode", "host", "--rank", "3", "--at", "3",
                ],
                cwd=folders[node], env=cli_env(), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True,
            )
            for node, (ns, dev, addr) in enumerate(hosts)
        ]  # fmt: skip
        outputs = [p.communicate(timeout=240) for p in procs]
    hang = json.loads((folders[0] / "run" / "hang.json").read_text())
    assert sorted(r["rank"] for r in hang["ranks"]) == [0, 1, 2, 3], "every rank, from node 0"
    [verdict] = hang["verdicts"]
    assert (verdict["kind"], verdict["ranks"], verdict["waiting"]) == (
        "missing", [3], [0, 1, 2],
    ), outputs[0][1]  # fmt: skip
    assert hang["idle_s"] < 3.0 + 5.0
    stacks = {r["rank"]: r["stack"] for r in hang["ranks"]}
    assert "hang_train.py" in stacks[3], "node 1's relay sent rank 3's stacks"
    calls = {r["rank"]: r["last_calls"] for r in hang["ranks"]}
    assert calls[2] and calls[3], "node 1's relay sent its ranks' last calls from their rings"
    assert calls[3][0]["seq"] == calls[0][0]["seq"], "rank 3 completed what rank 0 did"
    assert not (folders[0] / "run" / "live" / "rank-3.state").exists(), "nothing shared"
    assert gone([r["pid"] for r in hang["ranks"]])


@pytest.mark.heavy
def test_top_connects_to_the_jobs_store_from_anywhere(tmp_path):
    """`top --connect MASTER_ADDR:MASTER_PORT` with no run directory: both ranks, their
    steps and collectives, and once nothing progressed for 10 s the verdict, from the node's
    record its relay published (which the metrics per node read too). Then a kill and a
    stacks request without the key: no rank stops, no stacks, and the relays say so."""
    from test_launch_cluster import free_port

    port, metrics = free_port(), free_port()
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    job = unique_job()
    options = ("--metrics-port", str(metrics), "--metrics-per", "node")
    procs = srun_tasks(tmp_path, job, env, options)
    try:
        wait_until(lambda: rank_waits(tmp_path / "run", 11.0), what="rank 0 waiting 11 s")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        view = subprocess.run(
            [*CLI, "top", "--connect", f"127.0.0.1:{port}", "--once"], cwd=elsewhere,
            env=cli_env() | {"COLUMNS": "200"}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert view.returncode == 0, view.stderr
        assert "2 of 2 ranks reporting" in view.stdout
        assert "all_reduce #7" in view.stdout and "in it" in view.stdout
        assert "rank 1 has not entered all_reduce #7" in view.stdout
        node_record_read(port, metrics)
        asked = ask_without_the_key(port)
        time.sleep(2.0)  # 8 polls of the relays
        assert not gone(rank_pids(tmp_path / "run")), "a kill without the key stops nothing"
        store = TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False)
        assert not any(store.check([f"scalescope/stack/{r}/{asked}"]) for r in (0, 1))
    finally:
        errors = ""
        for p in procs:
            p.kill()
            errors += p.communicate(timeout=30)[1]
    for what in ("kill", "stacks"):
        assert f"scalescope: ignored a {what} request in the job's store: not sealed" in errors


def node_record_read(port: int, metrics: int) -> None:
    """The node's record in the job's store: both ranks, 3 steps done, rank 0 in all_reduce
    #7; `top --connect`'s frames from it; the metrics per node from it, none unknown."""
    import socket
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families
    from rich.console import Console

    from scalescope.launch.channel.seals import load_key
    from scalescope.launch.channel.store import Channel
    from scalescope.live.store_view import StoreTop

    key = load_key(create=False)
    channel = Channel(TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False),
                      key=key, warn=None)  # fmt: skip
    [record] = channel.node_records().values()
    assert (record.ranks, record.host, record.steps_min, record.steps_max) == (
        (0, 1), socket.gethostname(), 3, 3)  # fmt: skip
    assert record.in_collective == 1 and record.oldest is not None
    assert (record.oldest.rank, record.oldest.op, record.oldest.seq) == (0, "all_reduce", 7)
    top = StoreTop(channel)
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for _ in range(2):
        console.print(top.frame())
    out = console.export_text()
    assert (
        "2 of 2 ranks reporting on 1 node(s); steps done 3 (slowest) to 3, 0.00 steps/s "
        "(slowest node)" in out
    ), out
    assert "rank 1 has not entered all_reduce #7" in out
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as r:
        text = r.read().decode()
    samples = {
        (s.name, s.labels.get("Hostname", "")): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }  # fmt: skip
    assert samples[("scalescope_step", socket.gethostname())] == 3, text
    assert samples[("scalescope_steps_total", socket.gethostname())] == 6, "2 ranks x 3"
    assert samples[("scalescope_node_records_unknown", "")] == 0


def ask_without_the_key(port: int) -> int:
    """A kill and a stacks request through scalescope's own client, for the job's id and the
    relays' sessions read from the store, sealed with another key; the stacks request's count."""
    from intruder import Intruder

    from scalescope.launch.channel.store import KILL, STACKS

    store = TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False)
    intruder = Intruder(store)
    intruder.ask(KILL)
    return intruder.ask(STACKS)


def relays_and_view(tmp_path: Path, port: int) -> tuple[int, subprocess.CompletedProcess]:
    """The relay sessions the job's store counted, and one frame of `top --connect` to it."""
    store = TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False)
    relays = int(store.add("scalescope/relays", 0))
    view = subprocess.run(
        [*CLI, "top", "--connect", f"127.0.0.1:{port}", "--once"], cwd=tmp_path,
        env=cli_env() | {"COLUMNS": "200"}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return relays, view


@pytest.mark.heavy
@no_mpirun
def test_one_relay_relays_every_rank_of_a_node(tmp_path):
    """mpirun, 3 ranks on one node: one relay session in the job's store (the task of local
    rank 0), every rank's state in `top --connect`, every rank's stacks in hang.json through
    that relay, and every rank's end recorded once the watch stopped them."""
    from test_launch_cluster import free_port

    port = free_port()
    script = Path(sys.executable).with_name("scalescope")
    proc = subprocess.Popen(
        [*MPIRUN[:-1], "3", "-x", "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={port}",
         str(script), "run", "--oversubscribe", "--run-dir", "run", "--hang-after", "20",
         "--hang-action", "kill", "--no-report", str(HANG_TRAIN), "--mode", "host", "--at", "3"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_dir = tmp_path / "run"
    try:
        wait_until(lambda: proc.poll() is not None or rank_waits(run_dir, 1.0, 3),
                   what="rank 0 waiting")  # fmt: skip
        assert proc.poll() is None, proc.communicate()[1]
        relays, view = relays_and_view(tmp_path, port)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert "3 of 3 ranks reporting" in view.stdout, view.stdout + view.stderr
    assert relays == 1, "one relay for the node's 3 ranks"
    hang = json.loads((run_dir / "hang.json").read_text())
    stacks = {r["rank"]: r["stack"] for r in hang["ranks"]}
    assert all("hang_train.py" in stacks[r] for r in (0, 1, 2)), err
    run = load_run(run_dir)
    assert all(run.ranks[r].status != "running" for r in (0, 1, 2)), err
    assert "Broken pipe" not in err, err


@pytest.mark.heavy
def test_two_nodes_of_two_ranks_have_one_relay_each(tmp_path):
    """srun's variables for 2 nodes x 2 tasks, each node its own host name (a UTS namespace
    per task): one relay session per node in the job's store, all 4 ranks in `top --connect`,
    rank 3's stacks (node b's second rank) through node b's relay, and every rank's end."""
    import os

    from test_launch_cluster import free_port, two_node_task

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("a host name per node needs unshare --uts as root")
    port, job = free_port(), unique_job()
    argv = [*CLI, "run", "--oversubscribe", "--run-dir", "run", "--hang-after", "20",
            "--hang-action", "kill", "--no-report", str(HANG_TRAIN), "--mode", "host",
            "--rank", "3", "--at", "3"]  # fmt: skip
    procs = [two_node_task(rank, job, port, argv, cwd=tmp_path) for rank in range(4)]
    run_dir = tmp_path / "run"
    try:
        wait_until(lambda: any(p.poll() is not None for p in procs)
                   or rank_waits(run_dir, 1.0, 4), what="rank 0 waiting")  # fmt: skip
        relays, view = relays_and_view(tmp_path, port)
        errors = [p.communicate(timeout=120)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=30)
    assert relays == 2, "one relay per node"
    assert "4 of 4 ranks reporting on 2 node(s)" in view.stdout, view.stdout + view.stderr
    hang = json.loads((run_dir / "hang.json").read_text())
    stacks = {r["rank"]: r["stack"] for r in hang["ranks"]}
    assert "hang_train.py" in stacks[3], errors[2]
    run = load_run(run_dir)
    assert all(run.ranks[r].status != "running" for r in range(4)), errors[0]
    assert not any("Broken pipe" in e for e in errors), errors
