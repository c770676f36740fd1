"""Real ranks, started as srun and mpiexec.hydra start them, form a gloo world with no address
or port given: loopback or the node list's first host, and the job's port (or the next one)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from launcher_envs import listening_socket, unique_job

from scalescope.launch.world.rendezvous import LOOPBACK, job_port, job_ports

RANK_SCRIPT = """
import os, torch, torch.distributed as dist
from scalescope.launch.world.rendezvous import meet
from scalescope.launch.world.detect import detect_world
with meet(detect_world()) as world:
    os.environ.update(world.torch_env())
    dist.init_process_group("gloo")
    total = torch.tensor([world.rank + 1.0])
    dist.all_reduce(total)
    print(world.source, world.rank, world.world_size, world.master_addr, int(total.item()),
          world.master_port)
    dist.destroy_process_group()
"""

FOREIGN = ("SLURM_", "OMPI_", "PMI", "MV2_", "MPI_LOCAL", "MPIRUN_", "TORCHELASTIC_", "GROUP_")


def srun_env(rank: int, job: str, nodes: int, nodelist: str) -> dict[str, str]:
    """What srun sets for task ``rank`` of a 2-task step, one task per node when nodes=2."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR"):
        env.pop(name, None)
    env.pop("MASTER_PORT", None)
    env.update(
        {
            "SLURM_JOB_ID": job,
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank if nodes == 1 else 0),
            "SLURM_NODEID": str(0 if nodes == 1 else rank),
            "SLURM_NTASKS": "2",
            "SLURM_NNODES": str(nodes),
            "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_STEP_NUM_NODES": str(nodes),
            "SLURM_STEP_TASKS_PER_NODE": "2" if nodes == 1 else "1(x2)",
            "SLURM_JOB_NODELIST": nodelist,
            "SLURM_STEP_NODELIST": nodelist,
            "OMP_NUM_THREADS": "1",
        }
    )
    return env


def run_ranks(envs: list[dict[str, str]]) -> list[list[str]]:
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK_SCRIPT],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in envs
    ]
    outputs = []
    try:
        for proc in ranks:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-2000:]
            outputs.append(out.split())
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
    return outputs


def hydra_env(rank: int) -> dict[str, str]:
    """What MPICH's / Intel MPI's mpiexec.hydra sets for rank ``rank`` of 2 on one node: no
    job id, so the ranks' common parent (this test, as hydra_pmi_proxy would be) names it."""
    env = {k: v for k, v in srun_env(rank, "0", 1, "").items() if not k.startswith("SLURM_")}
    env.update(
        {"PMI_RANK": str(rank), "PMI_SIZE": "2", "PMI_FD": "9", "MPI_LOCALRANKID": str(rank),
         "MPI_LOCALNRANKS": "2"}
    )  # fmt: skip
    return env


@pytest.mark.parametrize(
    ("launcher", "nodes", "nodelist", "addr"),
    [
        pytest.param(
            "slurm",
            1,
            "node[01-03,07],gpu5",
            LOOPBACK,
            id="srun-one-node",
            marks=pytest.mark.heavy,
        ),  # fmt: skip
        pytest.param(
            "slurm",
            2,
            "localhost,node[01-03,07],gpu5",
            "localhost",
            id="srun-two-nodes-from-the-node-list",
        ),  # fmt: skip
        pytest.param("hydra", 1, "", LOOPBACK, id="mpiexec-hydra-one-node"),
    ],
)
def test_ranks_form_a_gloo_world_without_address_or_port(launcher, nodes, nodelist, addr):
    job = unique_job()
    if launcher == "slurm":
        envs = [srun_env(rank, job, nodes, nodelist) for rank in (0, 1)]
    else:
        envs = [hydra_env(rank) for rank in (0, 1)]
    outputs = run_ranks(envs)
    assert [line[:5] for line in outputs] == [
        [launcher, "0", "2", addr, "3"],
        [launcher, "1", "2", addr, "3"],
    ]
    assert outputs[0][5] == outputs[1][5]


@pytest.mark.heavy
def test_srun_ranks_meet_past_a_taken_job_port():
    """rank 0 finds the derived port taken, hosts on the next one, and rank 1 follows."""
    job = unique_job()
    blocker = listening_socket(job_port(job))
    if blocker is None:
        pytest.skip("the derived port is already taken by another program")
    with blocker:
        outputs = run_ranks([srun_env(rank, job, 1, "node[01-03,07],gpu5") for rank in (0, 1)])
    assert [line[4:] for line in outputs] == [["3", str(job_ports(job)[1])]] * 2
