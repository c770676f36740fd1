"""A rank's last calls from its flight recorder (events/flight_ring.py), for a hang's report.

The live state holds only the collective a rank entered last; its ring holds the calls
before it. A rank whose last completed call on a group is behind its peers' did not finish
the one they went on from, whatever its live state says now."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.events.flight_ring import OVERFLOW, RingRead
from scalescope.events.schema import Kind

LAST_CALLS = 5
"""Collectives of each rank a hang's report lists, the last one first."""


@dataclass(frozen=True)
class RingCall:
    """One collective of a rank's ring."""

    step: int
    op: str
    group: str
    seq: int
    nbytes: int
    tag: str
    started_s: float
    """Wall-clock time (s since the epoch) it was issued."""
    dur_s: float | None
    """Issue to completion; None when it had not completed as the ring took it."""


def last_calls(ring: RingRead, count: int = LAST_CALLS) -> tuple[RingCall, ...]:
    """The ring's last ``count`` collectives, the latest first (by their completion, the
    order the ring took them)."""
    r = ring.records
    at = np.flatnonzero(r["kind"] == Kind.COLLECTIVE)[-count:][::-1]

    def text(column: str, i: int) -> str:
        sid = int(r[column][i])
        return ring.strings[sid] if 0 <= sid < len(ring.strings) else OVERFLOW

    return tuple(
        RingCall(
            step=int(r["step"][i]),
            op=text("name", i),
            group=text("group", i),
            seq=int(r["seq"][i]),
            nbytes=int(r["nbytes"][i]),
            tag=text("tag", i),
            started_s=(int(r["start_ns"][i]) + ring.wall_minus_perf_ns) / 1e9,
            dur_s=None if r["dur_ns"][i] < 0 else int(r["dur_ns"][i]) / 1e9,
        )  # fmt: skip
        for i in at
    )
