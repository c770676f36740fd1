"""Find the world an external launcher started this process in.

``srun scalescope run train.py`` or ``mpirun -n 8 scalescope run train.py`` starts scalescope
once per rank; each copy reads its rank, sizes and rendezvous address from the variables the
launcher exported and joins torch.distributed directly (env:// through :meth:`World.torch_env`),
with no second launcher inside.

Launchers and the variables read (first match wins, see :func:`detect_world`):

* torchrun / torch elastic agent: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
  ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``GROUP_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``,
  ``TORCHELASTIC_RUN_ID`` (``torch/distributed/elastic/agent/server/local_elastic_agent.py``).
* Slurm ``srun`` step: ``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID``, ``SLURM_STEP_ID``,
  ``SLURM_STEP_NUM_TASKS`` (else ``SLURM_NTASKS``), ``SLURM_STEP_TASKS_PER_NODE``,
  ``SLURM_STEP_NUM_NODES``, ``SLURM_STEP_NODELIST`` (else ``SLURM_JOB_NODELIST``),
  ``SLURM_JOB_ID`` (Slurm ``src/common/env.c``, ``srun`` man page).
* Open MPI 3/4 (ORTE), 5 (PRRTE/PMIx ``pmdl/ompi``) and Fujitsu MPI: ``OMPI_COMM_WORLD_RANK``,
  ``_SIZE``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``; job id ``PMIX_NAMESPACE``,
  ``OMPI_MCA_ess_base_jobid``, ``OMPI_MCA_orte_ess_jobid`` or ``PJM_JOBID``.
  ``OMPI_COMM_WORLD_NODE_RANK`` is *not* a node index (Open MPI documents it as the rank on
  this node across all jobs), so it is ignored.
* MVAPICH2 ``mpirun_rsh``: ``MV2_COMM_WORLD_RANK``, ``_SIZE``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``,
  ``MV2_NODE_ID``, ``MV2_NUM_NODES_IN_JOB``, job id ``MPIRUN_ID`` (set by ``mpispawn``).
* MPICH / Intel MPI hydra: ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``.
* PMIx servers (PRRTE without the Open MPI personality, ``prun``): ``PMIX_RANK`` and
  ``PMIX_NAMESPACE`` only; the PMIx standard passes the sizes through its API, not the
  environment, so a world needs ``PMIX_SIZE`` from a launcher that sets one.

Only torchrun gives a rendezvous address and port; for the others
:mod:`scalescope.launch.world.rendezvous` finds them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from scalescope.launch.world.slurm import from_slurm
from scalescope.launch.world.variables import (
    MPI_VARS,
    TORCHRUN_VARS,
    World,
    check_port,
    need,
    read_world,
)


def detect_world(
    env: Mapping[str, str] = os.environ,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> World | None:
    """The world an external launcher started this process in, or None without a launcher.

    Checked in order: torchrun (or plain env:// variables), a Slurm step, Open MPI, MVAPICH2,
    hydra, PMIx. ``master_addr`` / ``master_port`` (``--master-addr`` / ``--master-port``)
    override what the environment says. A world may come back without a master address or
    port: :func:`scalescope.launch.world.rendezvous.meet` finds them before :meth:`World.torch_env`.
    """
    world = _from_torchrun(env) or from_slurm(env) or _from_mpi(env)
    if world is None:
        return None
    if master_port is not None:
        check_port(master_port, "--master-port")
    addr = master_addr or world.master_addr
    port = master_port if master_port is not None else world.master_port
    return replace(world, master_addr=addr, master_port=port)


def _from_torchrun(env: Mapping[str, str]) -> World | None:
    """torchrun's workers, or a hand-made env:// world (RANK ... plus MASTER_ADDR/PORT)."""
    plain = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    elastic = "TORCHELASTIC_RUN_ID" in env
    if not elastic and not all(name in env for name in plain):
        return None
    source = "torchrun" if elastic else "env"
    trigger = "TORCHELASTIC_RUN_ID" if elastic else "RANK"
    need(env, source, trigger, ("RANK", "MASTER_ADDR", "MASTER_PORT"))
    return read_world(env, TORCHRUN_VARS, source)


def _from_mpi(env: Mapping[str, str]) -> World | None:
    for names in MPI_VARS:
        if names.rank in env:
            return read_world(env, names)
    return None
