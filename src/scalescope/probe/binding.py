"""Apply the launcher's placement inside a rank, before torch (and OpenMP) start.

The launcher passes one placement per local rank in ``SCALESCOPE_PLACEMENTS`` (JSON);
the rank takes its own by ``LOCAL_RANK``, sets the OpenMP variables and its CPU affinity.
This must run before ``import torch``: OpenMP reads its variables once, at start-up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

PLACEMENTS_ENV = "SCALESCOPE_PLACEMENTS"


def format_cpulist(cpus: Iterable[int]) -> str:
    """Format cpu ids the way the kernel does: "0-3,8,10-11"."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            lo, hi = ids[start], ids[i - 1]
            parts.append(str(lo) if lo == hi else f"{lo}-{hi}")
            start = i
    return ",".join(parts)


@dataclass
class Binding:
    """What the rank is really bound to, read back from the OS after applying."""

    cpus: list[int] = field(default_factory=list)
    numa_node: int | None = None
    threads: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    applied: bool = False


def apply_placement(environ: dict[str, str] | None = None) -> Binding:
    environ = os.environ if environ is None else environ
    text = environ.get(PLACEMENTS_ENV)
    if not text:
        return Binding(cpus=sorted(os.sched_getaffinity(0)))
    placements = json.loads(text)
    local_rank = int(environ.get("LOCAL_RANK", "0"))
    placement = placements[local_rank % len(placements)]
    env = {str(k): str(v) for k, v in placement.get("env", {}).items()}
    environ.update(env)
    cpus = placement.get("cpus") or []
    if cpus:
        os.sched_setaffinity(0, cpus)
    return Binding(
        cpus=sorted(os.sched_getaffinity(0)),
        numa_node=placement.get("numa_node"),
        threads=placement.get("threads"),
        env=env,
        applied=True,
    )
