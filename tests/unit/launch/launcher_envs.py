"""What the launchers export, one rank's view, and helpers shared by the world and rendezvous
tests."""

from __future__ import annotations

import itertools
import os
import socket

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


_JOBS = itertools.count()


def unique_job() -> str:
    """A job id no other test (or test run on this machine) uses at the same time."""
    return str(100000 + (os.getpid() * 7919 + next(_JOBS) * 104729) % 900000)


def listening_socket(port: int) -> socket.socket | None:
    sock = socket.socket()
    try:
        sock.bind(("", port))
    except OSError:
        sock.close()
        return None
    sock.listen()
    return sock
