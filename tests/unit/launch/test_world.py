"""Finding the world from launcher variables: torchrun, srun, mpirun (Open MPI 4 and 5),
mpiexec.hydra (MPICH, Intel MPI), MVAPICH2's mpirun_rsh and bare PMIx; Slurm hostlists; and two
real ranks that form a gloo world from Slurm-like variables alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest

from scalescope.launch.world import (
    World,
    WorldError,
    agree_master,
    detect_world,
    expand_hostlist,
    job_port,
    parse_tasks_per_node,
)

# --- what the launchers export, one rank's view ---------------------------------------------

# torchrun --nnodes 2 --nproc-per-node 4 (local_elastic_agent.py), worker 6 on the second node.
TORCHRUN = {
    "RANK": "6",
    "GROUP_RANK": "1",
    "ROLE_RANK": "6",
    "ROLE_NAME": "default",
    "LOCAL_RANK": "2",
    "LOCAL_WORLD_SIZE": "4",
    "WORLD_SIZE": "8",
    "GROUP_WORLD_SIZE": "2",
    "ROLE_WORLD_SIZE": "8",
    "MASTER_ADDR": "node01",
    "MASTER_PORT": "29400",
    "TORCHELASTIC_RESTART_COUNT": "0",
    "TORCHELASTIC_MAX_RESTARTS": "0",
    "TORCHELASTIC_RUN_ID": "job7",
    "TORCHELASTIC_USE_AGENT_STORE": "False",
    "TORCHELASTIC_ERROR_FILE": "/tmp/torchelastic_x/attempt_0/6/error.json",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "OMP_NUM_THREADS": "1",
}

# srun -N 4 -n 8 --ntasks-per-node 2 in job 4242 (step 3), task 5: third node, second task.
SRUN = {
    "SLURM_CLUSTER_NAME": "hpc",
    "SLURM_CPUS_ON_NODE": "48",
    "SLURM_DISTRIBUTION": "block",
    "SLURM_GTIDS": "4,5",
    "SLURM_JOBID": "4242",
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NAME": "train",
    "SLURM_JOB_NODELIST": "node[01-03,07]",
    "SLURM_JOB_NUM_NODES": "4",
    "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.1",
    "SLURM_LOCALID": "1",
    "SLURM_NNODES": "4",
    "SLURM_NODEID": "2",
    "SLURM_NODELIST": "node[01-03,07]",
    "SLURM_NPROCS": "8",
    "SLURM_NTASKS": "8",
    "SLURM_NTASKS_PER_NODE": "2",
    "SLURM_PRIO_PROCESS": "0",
    "SLURM_PROCID": "5",
    "SLURM_SRUN_COMM_HOST": "10.0.0.1",
    "SLURM_SRUN_COMM_PORT": "40001",
    "SLURM_STEPID": "3",
    "SLURM_STEP_ID": "3",
    "SLURM_STEP_LAUNCHER_PORT": "40001",
    "SLURM_STEP_NODELIST": "node[01-03,07]",
    "SLURM_STEP_NUM_NODES": "4",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_STEP_TASKS_PER_NODE": "2(x4)",
    "SLURM_SUBMIT_DIR": "/home/u",
    "SLURM_TASKS_PER_NODE": "2(x4)",
    "SLURM_TASK_PID": "31337",
    "SLURM_TOPOLOGY_ADDR": "node03",
    "SLURMD_NODENAME": "node03",
}

# The batch script itself (sbatch -n 8): rank-like variables, but no step id.
SBATCH_SCRIPT = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "node[01-04]",
    "SLURM_NTASKS": "8",
    "SLURM_TASKS_PER_NODE": "2(x4)",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_GTIDS": "0",
    "SLURM_TASK_PID": "1200",
}

# mpirun -n 8 (Open MPI 4.1, ORTE, with its internal PMIx 3) over 2 nodes, rank 6.
OPENMPI4 = {
    "OMPI_COMM_WORLD_SIZE": "8",
    "OMPI_COMM_WORLD_RANK": "6",
    "OMPI_COMM_WORLD_LOCAL_RANK": "2",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
    "OMPI_COMM_WORLD_NODE_RANK": "2",
    "OMPI_UNIVERSE_SIZE": "8",
    "OMPI_FIRST_RANKS": "0",
    "OMPI_APP_CTX_NUM_PROCS": "8",
    "OMPI_NUM_APP_CTX": "1",
    "OMPI_FILE_LOCATION": "/tmp/ompi.node02.1000/pid.1234/0/6",
    "OMPI_MCA_ess": "^singleton",
    "OMPI_MCA_ess_base_jobid": "2418540545",
    "OMPI_MCA_ess_base_vpid": "6",
    "OMPI_MCA_orte_hnp_uri": "2418540544.0;tcp://10.0.0.1:41234",
    "OMPI_MCA_orte_app_num": "0",
    "OMPI_MCA_orte_launch": "1",
    "OMPI_MCA_initial_wdir": "/home/u",
    "OMPI_COMMAND": "scalescope",
    "OMPI_ARGV": "run train.py",
    "PMIX_NAMESPACE": "2418540545",
    "PMIX_RANK": "6",
    "PMIX_SERVER_URI3": "pmix-server.1234;tcp4://127.0.0.1:50711",
    "PMIX_SERVER_URI2": "pmix-server.1234;tcp4://127.0.0.1:50711",
    "PMIX_SECURITY_MODE": "native",
    "PMIX_PTL_MODULE": "tcp,usock",
    "PMIX_BFROP_BUFFER_TYPE": "PMIX_BFROP_BUFFER_NON_DESC",
    "PMIX_GDS_MODULE": "ds21,ds12,hash",
    "PMIX_HOSTNAME": "node02",
    "PMIX_VERSION": "3.2.3",
}

# mpirun --map-by node -n 4 (Open MPI 5, PRRTE; OMPI_* from PMIx's pmdl/ompi), rank 1:
# round-robin, so rank 1 is the first rank of the second node.
OPENMPI5 = {
    "OMPI_UNIVERSE_SIZE": "4",
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_WORLD_SIZE": "4",
    "OMPI_MCA_num_procs": "4",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_WORLD_LOCAL_SIZE": "2",
    "OMPI_NUM_APP_CTX": "1",
    "OMPI_FILE_LOCATION": "/tmp/prte.node02.1000/dvm.81234/1/1",
    "OMPI_MCA_initial_wdir": "/home/u",
    "OMPI_COMMAND": "scalescope",
    "OMPI_ARGV": "run train.py",
    "OMPI_MCA_cpu_type": "x86_64",
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "OMPI_COMM_WORLD_NODE_RANK": "0",
    "PMIX_NAMESPACE": "prterun-login1-81234@1",
    "PMIX_RANK": "1",
    "PMIX_SERVER_URI41": "prterun-login1-81234@0.1;tcp4://10.0.0.2:39321",
    "PMIX_SERVER_URI4": "prterun-login1-81234@0.1;tcp4://10.0.0.2:39321",
    "PMIX_SECURITY_MODE": "munge,native",
    "PMIX_BFROP_BUFFER_TYPE": "PMIX_BFROP_BUFFER_FULLY_DESC",
    "PMIX_GDS_MODULE": "hash",
    "PMIX_HOSTNAME": "node02",
    "PMIX_VERSION": "5.0.3",
}

# mpiexec -n 4 -ppn 2 (MPICH hydra; Intel MPI's mpiexec.hydra sets the same), rank 3.
HYDRA = {
    "PMI_RANK": "3",
    "PMI_SIZE": "4",
    "PMI_FD": "6",
    "MPI_LOCALRANKID": "1",
    "MPI_LOCALNRANKS": "2",
}
INTEL_MPI = {**HYDRA, "I_MPI_ROOT": "/opt/intel/oneapi/mpi/2021.12"}

# mpirun_rsh -np 4 node01 node01 node02 node02 (MVAPICH2's mpispawn), rank 2.
MVAPICH2 = {
    "MV2_COMM_WORLD_RANK": "2",
    "MV2_COMM_WORLD_SIZE": "4",
    "MV2_COMM_WORLD_LOCAL_RANK": "0",
    "MV2_COMM_WORLD_LOCAL_SIZE": "2",
    "MV2_NUM_NODES_IN_JOB": "2",
    "MV2_NODE_ID": "1",
    "MPIRUN_RANK": "2",
    "MPIRUN_NPROCS": "4",
    "MPIRUN_ID": "31337",
    "MPIRUN_MPD": "0",
    "PMI_PORT": "node02:45678",
    "PMI_ID": "2",
}

# prterun without the Open MPI personality (or prun into a DVM): the PMIx server's own.
BARE_PMIX = {
    "PMIX_NAMESPACE": "prterun-login1-9000@1",
    "PMIX_RANK": "1",
    "PMIX_SERVER_URI41": "prterun-login1-9000@0.0;tcp4://10.0.0.1:40000",
    "PMIX_SECURITY_MODE": "native",
    "PMIX_GDS_MODULE": "hash",
    "PMIX_HOSTNAME": "node01",
    "PMIX_VERSION": "5.0.3",
}


@pytest.fixture(autouse=True)
def no_mpi4py(monkeypatch):
    """agree_master must not find a real mpi4py unless a test provides one."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)


# --- torchrun -------------------------------------------------------------------------------


def test_torchrun_worker():
    assert detect_world(TORCHRUN) == World(
        source="torchrun",
        rank=6,
        local_rank=2,
        world_size=8,
        local_world_size=4,
        node_rank=1,
        num_nodes=2,
        master_addr="node01",
        master_port=29400,
        job_id="job7",
    )


def test_torchrun_inside_srun_is_torchrun_and_default_run_id_is_no_job_id():
    world = detect_world({**SRUN, **TORCHRUN, "TORCHELASTIC_RUN_ID": "none"})
    assert world is not None
    assert (world.source, world.rank, world.job_id) == ("torchrun", 6, None)


def test_plain_env_init_variables_without_elastic_agent():
    env = {k: TORCHRUN[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    assert detect_world(env) is None  # no rendezvous address: not a launcher
    world = detect_world({**env, "MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "1234"})
    assert world is not None
    assert (world.source, world.node_rank, world.num_nodes) == ("env", 1, 2)


def test_torchrun_missing_variables_are_named():
    env = dict(TORCHRUN)
    del env["LOCAL_WORLD_SIZE"]
    with pytest.raises(WorldError, match="torchrun sets RANK but not LOCAL_WORLD_SIZE"):
        detect_world(env)


def test_torch_env_gives_what_env_init_reads():
    world = detect_world(TORCHRUN)
    assert world is not None
    assert world.torch_env() == {
        "RANK": "6",
        "LOCAL_RANK": "2",
        "WORLD_SIZE": "8",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "node01",
        "MASTER_PORT": "29400",
    }


def test_no_launcher_at_all():
    assert detect_world({"HOME": "/home/u", "PATH": "/usr/bin"}) is None


# --- Slurm ----------------------------------------------------------------------------------


def test_srun_task_with_compressed_node_list():
    assert detect_world(SRUN) == World(
        source="slurm",
        rank=5,
        local_rank=1,
        world_size=8,
        local_world_size=2,
        node_rank=2,
        num_nodes=4,
        master_addr="node01",
        master_port=10000 + 4242 % 20000,
        job_id="4242.3",
    )


def test_srun_uneven_tasks_per_node():
    env = {
        **SRUN,
        "SLURM_STEP_NUM_TASKS": "7",
        "SLURM_STEP_NUM_NODES": "3",
        "SLURM_STEP_TASKS_PER_NODE": "3,2(x2)",
        "SLURM_STEP_NODELIST": "node[01-03]",
        "SLURM_PROCID": "4",
        "SLURM_NODEID": "1",
        "SLURM_LOCALID": "1",
    }
    world = detect_world(env)
    assert world is not None
    assert (world.local_world_size, world.node_rank, world.num_nodes) == (2, 1, 3)


def test_the_batch_script_is_not_a_world():
    # Their SLURM_PROCID=0 is not a rank of an 8-task world: nobody else would ever join.
    assert detect_world(SBATCH_SCRIPT) is None


def test_step_node_list_preferred_then_job_node_list():
    env = {**SRUN, "SLURM_STEP_NODELIST": "gpu[12-13]"}
    assert detect_world(env).master_addr == "gpu12"
    env = {k: v for k, v in SRUN.items() if k not in ("SLURM_STEP_NODELIST", "SLURM_NODELIST")}
    env["SLURM_JOB_NODELIST"] = "cn-[0100-0103]"
    assert detect_world(env).master_addr == "cn-0100"


def _fake_scontrol(tmp_path: Path, body: str) -> dict[str, str]:
    script = tmp_path / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/scontrol.args"\n{body}\n')
    script.chmod(0o755)
    return {**SRUN, "PATH": str(tmp_path)}


def test_scontrol_expands_the_node_list_when_on_path(tmp_path):
    env = _fake_scontrol(tmp_path, "echo fromscontrol-a\necho fromscontrol-b")
    assert detect_world(env).master_addr == "fromscontrol-a"
    assert (tmp_path / "scontrol.args").read_text().split() == [
        "show",
        "hostnames",
        "node[01-03,07]",
    ]


def test_failing_scontrol_falls_back_to_the_parser(tmp_path):
    env = _fake_scontrol(tmp_path, "echo 'slurm_load_ctl_conf error' >&2\nexit 1")
    assert detect_world(env).master_addr == "node01"
    assert (tmp_path / "scontrol.args").exists()


def test_slurm_master_from_environment_and_arguments():
    env = {**SRUN, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "31000"}
    world = detect_world(env)
    assert (world.master_addr, world.master_port) == ("10.0.0.5", 31000)
    world = detect_world(env, master_addr="10.0.0.6", master_port=32000)
    assert (world.master_addr, world.master_port) == ("10.0.0.6", 32000)
    assert detect_world(SRUN, master_port=33000).master_addr == "node01"


def test_srun_direct_launch_of_pmix_ranks_is_slurm():
    env = {**SRUN, "PMIX_RANK": "5", "PMIX_NAMESPACE": "slurm.pmix.4242.3"}
    assert detect_world(env).source == "slurm"


def test_mpirun_inside_a_slurm_job_is_not_taken_for_its_daemon_step():
    # mpirun starts one orted per node with srun; its ranks inherit the daemon's SLURM_PROCID.
    daemon_step = {
        "SLURM_JOB_ID": "4242",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "1",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
        "SLURM_STEP_NODELIST": "node[01-02]",
    }
    world = detect_world({**daemon_step, **OPENMPI4})
    assert (world.source, world.rank, world.world_size) == ("openmpi", 6, 8)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"SLURM_PROCID": "8"}, "SLURM_PROCID=8 is not below SLURM_STEP_NUM_TASKS=8"),
        ({"SLURM_LOCALID": "2"}, "SLURM_LOCALID=2 is not below SLURM_STEP_TASKS_PER_NODE=2"),
        ({"SLURM_STEP_TASKS_PER_NODE": "2(x3)"}, "SLURM_STEP_TASKS_PER_NODE='2(x3)' does not"),
        ({"SLURM_NODEID": "x"}, "SLURM_NODEID='x' is not a non-negative integer"),
        ({"SLURM_STEP_NODELIST": "node[01-03"}, "SLURM_STEP_NODELIST: hostlist"),
        ({"SLURM_NTASKS": "", "SLURM_STEP_NUM_TASKS": ""}, "Slurm sets SLURM_PROCID but not"),
    ],
)
def test_inconsistent_slurm_variables_are_named(change, named):
    with pytest.raises(WorldError, match=named.replace("(", r"\(").replace(")", r"\)")):
        detect_world({**SRUN, **change})


def test_tasks_per_node_format():
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert parse_tasks_per_node("4") == [4]
    with pytest.raises(WorldError):
        parse_tasks_per_node("2x3")


def test_job_port_is_stable_and_in_range():
    assert job_port("4242") == 14242
    assert job_port("123456") == 10000 + 123456 % 20000
    port = job_port("prterun-login1-81234@1")
    assert port == job_port("prterun-login1-81234@1")
    assert 10000 <= port < 30000


# --- MPI launchers --------------------------------------------------------------------------

MISSING_OPEN_MPI = (
    "Open MPI gives no master address: pass --master-addr HOST (rank 0's host) and "
    "--master-port PORT, or install mpi4py (pip install 'scalescope[mpi]')"
)


def test_open_mpi_4_world_without_a_master_address():
    world = detect_world(OPENMPI4)
    assert world == World(
        source="openmpi",
        rank=6,
        local_rank=2,
        world_size=8,
        local_world_size=4,
        node_rank=1,  # derived; OMPI_COMM_WORLD_NODE_RANK=2 is a per-node rank, not a node
        num_nodes=2,
        master_addr=None,
        master_port=None,
        job_id="2418540545",
    )
    with pytest.raises(WorldError) as caught:
        agree_master(world)
    assert str(caught.value) == MISSING_OPEN_MPI
    with pytest.raises(WorldError, match="call agree_master first"):
        world.torch_env()


def test_open_mpi_5_round_robin_mapping():
    world = detect_world(OPENMPI5)
    assert world is not None
    assert (world.source, world.rank, world.local_rank) == ("openmpi", 1, 0)
    assert (world.node_rank, world.num_nodes) == (1, 2)
    assert world.job_id == "prterun-login1-81234@1"


def test_open_mpi_master_from_mpirun_x_or_arguments():
    world = detect_world({**OPENMPI4, "MASTER_ADDR": "node01"})
    assert (world.master_addr, world.master_port) == ("node01", job_port("2418540545"))
    assert agree_master(world) is world
    world = detect_world(OPENMPI4, master_addr="node01", master_port=29999)
    assert (world.master_addr, world.master_port) == ("node01", 29999)
    assert world.torch_env()["MASTER_PORT"] == "29999"


@pytest.mark.parametrize("env", [HYDRA, INTEL_MPI], ids=["mpich", "intel-mpi"])
def test_hydra(env):
    world = detect_world(env)
    assert (world.source, world.rank, world.world_size) == ("hydra", 3, 4)
    assert (world.local_rank, world.local_world_size, world.node_rank, world.num_nodes) == (
        1,
        2,
        1,
        2,
    )
    with pytest.raises(WorldError, match=r"^MPICH/Intel MPI \(hydra\) gives no master address"):
        agree_master(world)
    world = detect_world(env, master_addr="node01")
    assert (world.master_addr, world.master_port, world.job_id) == ("node01", 29500, None)


def test_mvapich2_mpirun_rsh():
    assert detect_world(MVAPICH2) == World(
        source="mvapich",
        rank=2,
        local_rank=0,
        world_size=4,
        local_world_size=2,
        node_rank=1,
        num_nodes=2,
        master_addr=None,
        master_port=None,
        job_id="31337",
    )


def test_bare_pmix_says_what_is_missing():
    with pytest.raises(WorldError, match="PMIx sets PMIX_RANK but not PMIX_SIZE") as caught:
        detect_world(BARE_PMIX)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"OMPI_COMM_WORLD_RANK": "8"}, "OMPI_COMM_WORLD_RANK=8 is not below OMPI_COMM_WORLD_SIZE"),
        ({"OMPI_COMM_WORLD_SIZE": ""}, "Open MPI sets OMPI_COMM_WORLD_RANK but not OMPI_COMM_WOR"),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "4"}, "OMPI_COMM_WORLD_LOCAL_RANK=4 is not below"),
        ({"OMPI_COMM_WORLD_LOCAL_SIZE": "9"}, "OMPI_COMM_WORLD_LOCAL_SIZE=9 is not in 1.."),
        ({"OMPI_COMM_WORLD_SIZE": "-8"}, "OMPI_COMM_WORLD_SIZE='-8' is not a non-negative"),
    ],
)
def test_inconsistent_mpi_variables_are_named(change, named):
    with pytest.raises(WorldError, match=named) as caught:
        detect_world({**OPENMPI4, **change})
    assert "\n" not in str(caught.value)


def test_bad_master_port_argument():
    with pytest.raises(WorldError, match="--master-port=70000"):
        detect_world(OPENMPI4, master_addr="node01", master_port=70000)


class _FakeComm:
    """COMM_WORLD as mpi4py gives it: the real bcast is MPI's business, not ours."""

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


def test_agree_master_rank_0_offers_its_address_and_a_free_port(monkeypatch):
    comm = _FakeComm(0, 8)
    _install_mpi4py(monkeypatch, comm)
    world = agree_master(detect_world({**OPENMPI4, "OMPI_COMM_WORLD_RANK": "0"}))
    (offer, root), *_ = comm.sent
    assert root == 0 and offer == (world.master_addr, world.master_port)
    assert isinstance(world.master_addr, str) and 0 < world.master_port < 65536


def test_agree_master_other_ranks_take_rank_0s_offer(monkeypatch):
    comm = _FakeComm(6, 8, from_root=("10.0.0.1", 23456))
    _install_mpi4py(monkeypatch, comm)
    world = agree_master(detect_world(OPENMPI4))
    assert comm.sent == [(None, 0)]
    assert world.torch_env()["MASTER_ADDR"] == "10.0.0.1"
    assert world.master_port == 23456


def test_agree_master_refuses_a_communicator_of_another_world(monkeypatch):
    _install_mpi4py(monkeypatch, _FakeComm(0, 1))
    with pytest.raises(WorldError, match=r"COMM_WORLD \(rank 0 of 1\) does not match Open MPI"):
        agree_master(detect_world(OPENMPI4))


# --- hostlists ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("a[1-2],b3,c[08-10]-ib", ["a1", "a2", "b3", "c08-ib", "c09-ib", "c10-ib"]),
        ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
        # Slurm's recursion: the last group innermost, the others from the second-last out.
        ("a[1-2]b[1-2]c[1]", ["a1b1c1", "a2b1c1", "a1b2c1", "a2b2c1"]),
        ("login1", ["login1"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[008-010]", ["n008", "n009", "n010"]),
        ("cn-[0100-0101] gpu7,,x", ["cn-0100", "cn-0101", "gpu7", "x"]),
        ("[1-2]", ["1", "2"]),
        ("", []),
    ],
)
def test_expand_hostlist(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("node[01-03", "'\\[' without '\\]'"),
        ("node01]", "'\\]' without '\\['"),
        ("node[[01]]", "nested"),
        ("node[03-01]", "runs backwards"),
        ("node[]", "is not a number"),
        ("node[a-c]", "is not a number"),
        ("node[1-2-3]", "is not a number"),
        ("node[1,]", "is not a number"),
    ],
)
def test_malformed_hostlists(text, why):
    with pytest.raises(ValueError, match=why):
        expand_hostlist(text)


# --- a real world from Slurm-like variables -------------------------------------------------

RANK_SCRIPT = """
import os, torch, torch.distributed as dist
from scalescope.launch.world import detect_world
world = detect_world()
os.environ.update(world.torch_env())
dist.init_process_group("gloo")
total = torch.tensor([world.rank + 1.0])
dist.all_reduce(total)
print(world.source, world.rank, world.world_size, world.master_addr, int(total.item()))
dist.destroy_process_group()
"""

FOREIGN = ("SLURM_", "OMPI_", "PMI", "MV2_", "MPI_LOCAL", "MPIRUN_", "TORCHELASTIC_", "GROUP_")


def _rank_env(rank: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR"):
        env.pop(name, None)
    env.update(
        {
            "SLURM_JOB_ID": "4242",
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank),
            "SLURM_NODEID": "0",
            "SLURM_NTASKS": "2",
            "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_STEP_NUM_NODES": "1",
            "SLURM_STEP_TASKS_PER_NODE": "2",
            "SLURM_STEP_NODELIST": "127.0.0.1",
            # The job-id port may be taken on a shared machine; a free one keeps this reliable.
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
    )
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_slurm_ranks_form_a_gloo_world():
    port = _free_port()
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK_SCRIPT],
            env=_rank_env(rank, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = []
    try:
        for proc in ranks:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err[-2000:]
            outputs.append(out.split())
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
    assert outputs == [
        ["slurm", "0", "2", "127.0.0.1", "3"],
        ["slurm", "1", "2", "127.0.0.1", "3"],
    ]
