"""Where ranks meet without address flags: one node (loopback, a port derived from the job id
and checked free by hosting the store), several nodes (mpi4py, the launcher's node list), and
the one-line errors. Real TCPStores and real gloo ranks; mpi4py's bcast under real mpirun."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import threading
import types
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from launcher_envs import HYDRA, OPENMPI4, SRUN, listening_socket, unique_job
from ports import free_port
from torch.distributed import TCPStore

from scalescope.launch.world.detect import detect_world
from scalescope.launch.world.rendezvous import (
    LOOPBACK,
    agree_by_mpi,
    job_port,
    job_ports,
    launcher_host,
    meet,
)
from scalescope.launch.world.variables import World, WorldError


@pytest.fixture(autouse=True)
def no_mpi4py(monkeypatch):
    """meet must not find a real mpi4py unless a test provides one."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)


def one_node_world(rank: int, job_id: str, size: int = 2) -> World:
    return World("openmpi", rank, rank, size, size, 0, 1, None, None, job_id)


def two_node_world(rank: int, job_id: str) -> World:
    return World("slurm", rank, 0, 2, 1, rank, 2, None, None, job_id)


# --- ports ----------------------------------------------------------------------------------


def test_job_port_is_stable_and_in_range():
    assert job_port("4242") == 14242
    assert job_port("123456") == 10000 + 123456 % 20000
    assert job_port("4242.3") == 14245, "Slurm's JOB.STEP: steps of one job differ"
    assert job_port("prterun-login1-81234@1") == job_port("prterun-login1-81234@1")
    assert 10000 <= job_port("prterun-login1-81234@1") < 30000
    assert job_port(None) == 29500


def test_job_ports_follow_the_derived_port_and_wrap_inside_the_range():
    assert job_ports("4242") == list(range(14242, 14250))
    assert job_ports("19998") == [29998, 29999, 10000, 10001, 10002, 10003, 10004, 10005]


# --- one node -------------------------------------------------------------------------------


def _meet_both(worlds: list[World]) -> list[World]:
    """Rank 0 in this thread, the others in threads, as separate processes would."""
    met: dict[int, World] = {}
    errors: list[BaseException] = []

    def other(world: World) -> None:
        try:
            with meet(world, {}, timeout_s=30) as got:
                met[world.rank] = got
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=other, args=(w,)) for w in worlds[1:]]
    with meet(worlds[0], {}) as rank0:
        met[0] = rank0
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        client = TCPStore(rank0.master_addr, rank0.master_port, timeout=timedelta(seconds=10))
        client.set("seen", "yes")
    assert not errors, errors
    return [met[rank] for rank in range(len(worlds))]


def test_one_node_meets_on_loopback_at_the_derived_port():
    job = unique_job()
    met = _meet_both([one_node_world(r, job) for r in (0, 1)])
    ports = {w.master_port for w in met}
    assert {w.master_addr for w in met} == {LOOPBACK}
    assert len(ports) == 1 and ports.pop() in job_ports(job)
    assert all(w.agent_store for w in met)
    assert met[1].torch_env()["TORCHELASTIC_USE_AGENT_STORE"] == "True"


def test_one_node_falls_back_to_the_next_port_when_the_derived_one_is_taken():
    job = unique_job()
    blocker = listening_socket(job_port(job))
    if blocker is None:
        pytest.skip("the derived port is already taken by another program")
    with blocker:
        met = _meet_both([one_node_world(r, job, 3) for r in (0, 1, 2)])
    assert [w.master_port for w in met] == [job_ports(job)[1]] * 3


def test_given_address_and_port_are_kept_and_hosted_by_rank_0s_scalescope():
    """So the store outlives the ranks (channel.closing.close_store); _meet_both connects to it."""
    port = free_port()
    job = unique_job()
    worlds = [
        replace(one_node_world(r, job), master_addr=LOOPBACK, master_port=port) for r in (0, 1)
    ]
    met = _meet_both(worlds)
    assert [(w.master_addr, w.master_port, w.agent_store) for w in met] == [
        (LOOPBACK, port, True)
    ] * 2


@pytest.mark.parametrize(
    ("source", "env"),
    [("torchrun", {}), ("env", {"TORCHELASTIC_USE_AGENT_STORE": "True"})],
)
def test_a_store_torchs_agent_hosts_is_left_to_it(source, env):
    world = replace(one_node_world(0, "7"), source=source, master_addr="node09", master_port=31000)
    with meet(world, env) as got:
        assert got is world


def test_a_given_port_in_use_is_a_one_line_error():
    port = free_port()
    blocker = listening_socket(port)
    if blocker is None:
        pytest.skip("the port was taken in between")
    world = replace(one_node_world(0, unique_job()), master_port=port)
    expected = rf"^port {port} is in use on .*--master-port"
    with blocker, pytest.raises(WorldError, match=expected), meet(world, {}):
        pass


def test_other_ranks_give_up_with_one_line_when_rank_0_never_announces():
    with (
        pytest.raises(WorldError, match=r"^rank 0 announced no rendezvous port") as caught,
        meet(one_node_world(1, unique_job()), {}, timeout_s=0.3),
    ):
        pass
    assert "\n" not in str(caught.value)


# --- several nodes --------------------------------------------------------------------------


def test_launcher_node_lists_in_order(tmp_path):
    env = {**SRUN, "SLURM_STEP_NODELIST": "node[01-03,07],gpu5"}
    assert launcher_host("slurm", env) == ("node01", "SLURM_STEP_NODELIST")
    env = {k: v for k, v in SRUN.items() if k not in ("SLURM_STEP_NODELIST", "SLURM_NODELIST")}
    env["SLURM_JOB_NODELIST"] = "cn-[0100-0103]"
    assert launcher_host("slurm", env) == ("cn-0100", "SLURM_JOB_NODELIST")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# the rack\n\nnode07 slots=4\nnode08 slots=4\n")
    env = {**OPENMPI4, "OMPI_MCA_orte_default_hostfile": str(hostfile), **SRUN}
    assert launcher_host("openmpi", env) == ("node07", "OMPI_MCA_orte_default_hostfile")
    hostfile.write_text("n3:4\nn4:4\n")
    assert launcher_host("hydra", {**HYDRA, "HYDRA_HOST_FILE": str(hostfile)})[0] == "n3"
    assert launcher_host("hydra", {**HYDRA, "PBS_NODEFILE": str(hostfile)})[0] == "n3"
    assert launcher_host("openmpi", OPENMPI4) == (
        "10.0.0.1",
        "OMPI_MCA_orte_hnp_uri (mpirun's host)",
    )
    assert launcher_host("hydra", HYDRA) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLURM_STEP_NODELIST": "node[01-03"}, "SLURM_STEP_NODELIST: hostlist 'node[01-03'"),
        ({"HYDRA_HOST_FILE": "/nonexistent/h[1]"}, "HYDRA_HOST_FILE='/nonexistent/h[1]': cannot"),
    ],
)
def test_bad_node_lists_are_named(env, message):
    with pytest.raises(WorldError, match=message.replace("[", r"\[")):
        launcher_host("hydra", env)


def _fake_scontrol(tmp_path: Path, body: str) -> dict[str, str]:
    script = tmp_path / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/scontrol.args"\n{body}\n')
    script.chmod(0o755)
    return {**SRUN, "PATH": str(tmp_path)}


def test_scontrol_expands_the_node_list_when_on_path(tmp_path):
    env = _fake_scontrol(tmp_path, "echo fromscontrol-a\necho fromscontrol-b")
    assert launcher_host("slurm", env)[0] == "fromscontrol-a"
    args = (tmp_path / "scontrol.args").read_text().split()
    assert args == ["show", "hostnames", "node[01-03,07]"]


def test_failing_scontrol_falls_back_to_the_parser(tmp_path):
    env = _fake_scontrol(tmp_path, "echo 'slurm_load_ctl_conf error' >&2\nexit 1")
    assert launcher_host("slurm", env)[0] == "node01"
    assert (tmp_path / "scontrol.args").exists()


def test_several_nodes_meet_at_the_first_listed_host():
    job = unique_job()
    env = {"SLURM_STEP_NODELIST": "localhost,gpu5"}
    with meet(two_node_world(0, job), env) as rank0, meet(two_node_world(1, job), env) as rank1:
        assert (rank0.master_addr, rank0.master_port) == ("localhost", job_port(job))
        assert (rank1.master_addr, rank1.master_port) == ("localhost", job_port(job))
        TCPStore("localhost", job_port(job), timeout=timedelta(seconds=10)).set("k", "v")


def test_rank_0_refuses_a_listed_host_that_is_not_its_own():
    env = {"SLURM_STEP_NODELIST": "node[01-03,07],gpu5"}
    with pytest.raises(WorldError, match=r"^rank 0 runs on .*, not on node01, the first host of"):
        meet(two_node_world(0, unique_job()), env).__enter__()


def test_several_nodes_with_a_taken_port_ask_for_master_port():
    job = unique_job()
    blocker = listening_socket(job_port(job))
    if blocker is None:
        pytest.skip("the derived port is already taken by another program")
    with (
        blocker,
        pytest.raises(WorldError, match=rf"^port {job_port(job)} \(derived from the job id"),
    ):
        meet(two_node_world(0, job), {"SLURM_STEP_NODELIST": "localhost,gpu5"}).__enter__()


def test_several_nodes_and_nothing_to_go_by():
    world = detect_world({**OPENMPI4, "OMPI_MCA_orte_hnp_uri": ""})
    with pytest.raises(WorldError) as caught:
        meet(world, {}).__enter__()
    assert str(caught.value) == (
        "Open MPI gives no master address for 8 ranks on 2 nodes and mpi4py could not load an "
        "MPI library: pass --master-addr HOST (rank 0's host) or set a hostfile the launcher "
        "reads"
    )


# --- mpi4py ---------------------------------------------------------------------------------


class _FakeComm:
    """COMM_WORLD as mpi4py gives it, for the decisions around the bcast."""

    def __init__(self, rank: int, size: int, from_root: object = None) -> None:
        self.rank, self.size, self.from_root, self.sent = rank, size, from_root, []

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def bcast(self, obj: object, root: int = 0) -> object:
        self.sent.append((obj, root))
        return obj if self.rank == root else self.from_root


def _install_mpi4py(monkeypatch, comm: _FakeComm) -> None:
    mpi = types.ModuleType("mpi4py.MPI")
    mpi.COMM_WORLD = comm
    package = types.ModuleType("mpi4py")
    package.MPI = mpi
    monkeypatch.setitem(sys.modules, "mpi4py", package)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)


def test_mpi4py_other_ranks_take_rank_0s_offer(monkeypatch):
    comm = _FakeComm(6, 8, from_root=("10.0.0.1", 23456))
    _install_mpi4py(monkeypatch, comm)
    with meet(detect_world(OPENMPI4), {}) as world:
        assert comm.sent == [(None, 0)]
        assert (world.master_addr, world.master_port, world.agent_store) == (
            "10.0.0.1",
            23456,
            True,
        )


def test_mpi4py_of_another_mpi_is_not_used(monkeypatch):
    _install_mpi4py(monkeypatch, _FakeComm(0, 1))
    assert agree_by_mpi(detect_world(OPENMPI4)) is None


def test_mpi4py_is_not_asked_on_one_node(monkeypatch):
    comm = _FakeComm(0, 2)
    _install_mpi4py(monkeypatch, comm)
    with meet(one_node_world(0, unique_job()), {}) as world:
        assert world.master_addr == LOOPBACK
    assert comm.sent == []


def test_mpi4py_is_not_asked_under_srun(monkeypatch):
    comm = _FakeComm(0, 2)
    _install_mpi4py(monkeypatch, comm)
    job = unique_job()
    with meet(two_node_world(0, job), {"SLURM_STEP_NODELIST": "localhost,gpu5"}) as world:
        assert (world.master_addr, world.master_port) == ("localhost", job_port(job))
    assert comm.sent == []


MPI_SCRIPT = """
import sys
from pathlib import Path
from scalescope.launch.world.rendezvous import agree_by_mpi
from scalescope.launch.world.detect import detect_world
world = agree_by_mpi(detect_world())
Path(sys.argv[1], f"rank{world.rank}").write_text(f"{world.master_addr} {world.master_port}")
"""


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")
def test_real_mpi4py_bcast_under_mpirun(tmp_path):
    try:
        importlib.metadata.version("mpi4py")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("mpi4py is not installed")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    proc = subprocess.run(
        [*cmd, sys.executable, "-c", MPI_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    offers = [(tmp_path / f"rank{rank}").read_text().split() for rank in (0, 1)]
    assert offers[0] == offers[1], "both ranks got rank 0's offer"
    assert 0 < int(offers[0][1]) < 65536
