"""Joining worlds that other launchers start: Slurm variables, mpirun, torchrun, two nodes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ports import free_port

from conftest import DDP_TRAIN, cli_env, netns_unavailable, veth_hosts
from scalescope.events import Kind, load_run

CLI = [sys.executable, "-m", "scalescope.cli"]


def unique_job() -> str:
    """A Slurm job id that concurrent test runs on this machine do not share."""
    return str(100000 + (os.getpid() * 7919 + time.monotonic_ns() // 1000) % 900000)


def slurm_env(rank: int, ntasks: int, nodelist: str, job_id: str) -> dict[str, str]:
    """The variables srun sets for task ``rank`` of a one-node step of ``ntasks`` tasks."""
    return {
        **cli_env(),
        "SLURM_JOB_ID": job_id,
        "SLURM_NNODES": "1",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank),
        "SLURM_NODEID": "0",
        "SLURM_NTASKS": str(ntasks),
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_STEP_TASKS_PER_NODE": str(ntasks),
        "SLURM_TASKS_PER_NODE": str(ntasks),
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_STEP_NODELIST": nodelist,
    }


def two_node_task(rank: int, job_id: str, port: int, argv: list[str], **popen) -> subprocess.Popen:
    """Task ``rank`` of an srun step of 2 nodes x 2 tasks (``nodea``, ``nodeb``), started
    with its node's host name (``unshare --uts``, as root) and ``argv`` after it."""
    node = rank // 2
    env = slurm_env(rank, 4, "nodea,nodeb", job_id) | {
        "SLURM_NNODES": "2", "SLURM_STEP_NUM_NODES": "2", "SLURM_NODEID": str(node),
        "SLURM_LOCALID": str(rank % 2), "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
        "SLURM_TASKS_PER_NODE": "2(x2)", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    } | popen.pop("env", {})  # fmt: skip
    named = ["unshare", "--uts", "sh", "-c", f'hostname node{"ab"[node]} && exec "$@"', "sh"]
    return subprocess.Popen([*named, *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)  # fmt: skip


def check_world_of_two(run_dir: Path, launcher: str) -> None:
    run = load_run(run_dir)
    assert run.meta.launcher == launcher
    assert run.meta.world_size == 2
    assert sorted(run.ranks) == [0, 1]
    assert {m.status for m in run.ranks.values()} == {"completed"}
    assert sorted(m.rank for m in run.ranks.values()) == [0, 1]
    ev = run.events.of_kind(Kind.COLLECTIVE)
    grads = ev.select(ev.where("tag", "gradients"))
    counts = [int((grads.rank == r).sum()) for r in (0, 1)]
    assert counts[0] == counts[1] > 0, "both ranks reduced the same buckets: one world"


@pytest.fixture(scope="module")
def slurm_tasks(tmp_path_factory) -> tuple[Path, str, list[tuple[str, str]]]:
    """Two tasks as srun starts them, with no address flags (loopback and the job's port)
    and no --run-dir: the run's directory, the job id, each task's (stdout, stderr). One run
    for the world, the bindings, the report and the run directory's name."""
    cwd, job = tmp_path_factory.mktemp("slurm"), unique_job()
    procs = [
        subprocess.Popen(
            [*CLI, "run", "--report-bindings", "--bind-to", "core", str(DDP_TRAIN), "--steps", "3"],
            cwd=cwd,
            env=slurm_env(rank, 2, "node[01-03,07],gpu5", job),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    return cwd / "scalescope_runs" / f"ddp_train-slurm-{job}.0", job, outputs


@pytest.mark.heavy
def test_tasks_started_with_slurm_variables_form_one_world(slurm_tasks):
    run_dir, _job, outputs = slurm_tasks
    check_world_of_two(run_dir, "slurm")
    run = load_run(run_dir)
    assert [run.ranks[r].cpus for r in (0, 1)] == [[0], [1]]
    assert "rank 1 (local 1) on" in outputs[1][1] and "cpus 1" in outputs[1][1]
    assert "Throughput and step time" in outputs[0][0], "rank 0 reports"
    assert "Throughput and step time" not in outputs[1][0], "one report per job"


@pytest.mark.heavy
def test_run_dir_named_after_the_slurm_job(slurm_tasks):
    run_dir, job, _outputs = slurm_tasks
    assert [p.name for p in run_dir.parent.iterdir()] == [f"ddp_train-slurm-{job}.0"]
    assert load_run(run_dir).meta.launcher == "slurm"


@pytest.mark.heavy
def test_one_task_per_node_with_n_starts_local_ranks(tmp_path):
    env = {**slurm_env(0, 1, "localhost", unique_job()), "MASTER_PORT": str(free_port())}
    proc = subprocess.run(
        [*CLI, "run", "-n", "2", "--run-dir", "run", "--no-report", str(DDP_TRAIN), "--steps", "2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    check_world_of_two(tmp_path / "run", "slurm+elastic")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_mpirun_starts_ranks_that_join_one_world(tmp_path):
    """The command as users type it: the installed `scalescope` script, no address flags. It
    ends cleanly: every rank's line, and no C++ trace of a relay's request to a store whose
    owner had left (issue 41; benchmarks/mpirun_clean_ends.py runs it 20 times)."""
    script = Path(sys.executable).with_name("scalescope")
    assert script.is_file(), f"{script}: the package's console script is not installed"
    cmd = [
        "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", str(script), "run",
        "--run-dir", "run", "--no-report", str(DDP_TRAIN), "--steps", "3", "--world-line",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_world_of_two(tmp_path / "run", "openmpi")
    for rank in (0, 1):
        assert f"rank {rank} of 2: sum 3" in proc.stdout, proc.stdout
    said = "\n".join(ln for ln in proc.stderr.splitlines() if not ln.startswith("frame #"))
    for trace in ("Broken pipe", "terminate called", "Exception raised from"):
        assert trace not in proc.stderr, said


def test_mpi_world_over_nodes_with_nothing_to_go_by_is_refused(tmp_path):
    """Two nodes, no hostfile, no node list and no mpi4py (hidden): the one-line error."""
    hidden = tmp_path / "hidden" / "mpi4py"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    base = cli_env()
    env = {
        **base,
        "PYTHONPATH": f"{hidden.parent}{os.pathsep}{base.get('PYTHONPATH', '')}",
        "OMPI_COMM_WORLD_RANK": "0",
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
    }
    proc = subprocess.run(
        [*CLI, "run", "--run-dir", "run", str(DDP_TRAIN)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: Open MPI gives no master address for 2 ranks on 2 nodes")
    assert "pass --master-addr HOST (rank 0's host)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.heavy
def test_torchrun_workers_each_join_as_one_rank(tmp_path):
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-port", str(free_port()), "-m", "scalescope.cli", "run", "--run-dir", "run",
        "--no-report", str(DDP_TRAIN), "--steps", "2",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    check_world_of_two(tmp_path / "run", "torchrun")


@pytest.fixture
def two_hosts():
    """Two network namespaces joined by a veth pair: 10.211.7.1 and 10.211.7.2."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with veth_hosts("10.211.7", "ss") as hosts:
        yield hosts


@pytest.mark.parametrize("backend", ["c10d", pytest.param("static", marks=pytest.mark.heavy)])
def test_two_nodes_in_two_namespaces(two_hosts, tmp_path, backend):
    endpoint = f"{two_hosts[0][2]}:{free_port()}"
    procs = []
    for node, (ns, dev, addr) in enumerate(two_hosts):
        cmd = [
            "ip", "netns", "exec", ns, "env", f"GLOO_SOCKET_IFNAME={dev}", *CLI, "run",
            "--nnodes", "2", "--node-rank", str(node), "-n", "1", "--rdzv-backend", backend,
            "--rdzv-endpoint", endpoint, "--local-addr", addr, "--run-dir", "run", "--no-report",
            str(DDP_TRAIN), "--steps", "3",
        ]  # fmt: skip
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=tmp_path,
                env=cli_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
        )
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    for node, (_, err) in enumerate(outputs):
        assert "Broken pipe" not in err, f"node {node}: {err}"
    check_world_of_two(tmp_path / "run", "elastic")
    assert (tmp_path / "run" / "nodes" / "node-0001.json").exists()
