"""A suite's scaling: each entry's efficiency against its workload at the fewest ranks (the
record itself, ``SuiteResult``, is events/suite.py's)."""

from __future__ import annotations

from dataclasses import replace

from scalescope.analyze.runs.scaling import scaling_efficiency
from scalescope.events.suite import SuiteEntry


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
