"""Finding the world from launcher variables: torchrun, srun, mpirun (Open MPI 4 and 5),
mpiexec.hydra (MPICH, Intel MPI), MVAPICH2's mpirun_rsh and bare PMIx; Slurm hostlists."""

from __future__ import annotations

import pytest
from launcher_envs import (
    BARE_PMIX,
    HYDRA,
    INTEL_MPI,
    MVAPICH2,
    OPENMPI4,
    OPENMPI5,
    SBATCH_SCRIPT,
    SRUN,
    TORCHRUN,
)

from scalescope.launch.world.detect import detect_world
from scalescope.launch.world.hostlist import expand_hostlist
from scalescope.launch.world.slurm import parse_tasks_per_node
from scalescope.launch.world.variables import World, WorldError

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
        master_addr=None,  # found by rendezvous.meet: one node or the node list
        master_port=None,
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


def test_slurm_master_from_environment_and_arguments():
    env = {**SRUN, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "31000"}
    world = detect_world(env)
    assert (world.master_addr, world.master_port) == ("10.0.0.5", 31000)
    world = detect_world(env, master_addr="10.0.0.6", master_port=32000)
    assert (world.master_addr, world.master_port) == ("10.0.0.6", 32000)
    assert detect_world(SRUN, master_port=33000).master_addr is None


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


# --- MPI launchers --------------------------------------------------------------------------


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
    with pytest.raises(WorldError, match="call rendezvous.meet first"):
        world.torch_env()


def test_open_mpi_5_round_robin_mapping():
    world = detect_world(OPENMPI5)
    assert world is not None
    assert (world.source, world.rank, world.local_rank) == ("openmpi", 1, 0)
    assert (world.node_rank, world.num_nodes) == (1, 2)
    assert world.job_id == "prterun-login1-81234@1"


def test_open_mpi_master_from_mpirun_x_or_arguments():
    world = detect_world({**OPENMPI4, "MASTER_ADDR": "node01"})
    assert (world.master_addr, world.master_port) == ("node01", None)
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
    world = detect_world(env, master_addr="node01")
    assert (world.master_addr, world.master_port, world.job_id) == ("node01", None, None)


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
