"""The result of a suite of runs: one entry per workload and rank count, with scaling."""

from __future__ import annotations

from dataclasses import dataclass, replace

from scalescope.analyze.rank_split import RankSplit
from scalescope.analyze.scaling import scaling_efficiency

"""The result in a suite directory, beside its runs' directories."""


@dataclass(frozen=True)
class SuiteEntry:
    """One workload at one rank count."""

    workload: str
    family: str
    ranks: int
    size: int
    run_dir: str
    status: str
    """completed, failed, interrupted, or not run (the launcher refused it)."""
    error: str | None
    wall_s: float | None
    """The run from launch to the last rank's exit."""
    time_s: float | None
    """The workload's measured part, as it timed itself."""
    throughput: float | None
    unit: str | None
    """What throughput counts per second: images, tokens, rows."""
    per_rank: tuple[RankSplit, ...]
    efficiency: float | None = None
    """Scaling efficiency against the same workload at the fewest ranks (1.0 = linear)."""


@dataclass(frozen=True)
class SuiteResult:
    suite_dir: str
    quick: bool
    command: tuple[str, ...]
    entries: tuple[SuiteEntry, ...]
    interrupted: bool


def with_efficiency(entries: list[SuiteEntry]) -> tuple[SuiteEntry, ...]:
    """Each entry's scaling efficiency against its workload's run at the fewest ranks."""
    out = []
    for entry in entries:
        same = [e for e in entries if e.workload == entry.workload and e.throughput]
        base = min(same, key=lambda e: e.ranks, default=None)
        efficiency = None
        if base is not None and entry.throughput and base.ranks < entry.ranks:
            efficiency = scaling_efficiency(
                entry.ranks, entry.throughput, base.ranks, base.throughput or 0.0
            )
        out.append(replace(entry, efficiency=efficiency))
    return tuple(out)
