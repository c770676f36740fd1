"""What this machine gives the tests, read from the kernel rather than from scalescope: the
cores a process may use, so a test that needs more ranks than cores asks for as many as
make that true here (2 cores on the dev VM, more elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path


def usable_cores() -> int:
    """Physical cores among the cpus this process may run on (hyperthreads of one core count
    once), from /sys/devices/system/cpu/cpuN/topology."""
    cores = set()
    for cpu in os.sched_getaffinity(0):
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            package, core = "cpu", str(cpu)
        cores.add((package, core))
    return len(cores)


def more_ranks_than_cores() -> int:
    """The fewest ranks of one thread each that oversubscribe this machine."""
    return usable_cores() + 1


def counted(n: int, word: str) -> str:
    """``2 cores``, ``1 core``: a count as the CLI's messages write it."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
