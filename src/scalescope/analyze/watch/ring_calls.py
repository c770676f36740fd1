"""A rank's last calls from its flight recorder (events/flight_ring.py), for a hang's report.

The live state holds only the collective a rank entered last; its ring holds the calls
before it. A rank whose last completed call on a group is behind its peers' did not finish
the one they went on from, whatever its live state says now."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from scalescope.events.files import ring_path
from scalescope.events.flight_ring import OVERFLOW, RingError, RingRead, read_ring_tail
from scalescope.events.schema import Kind

LAST_CALLS = 5
"""Collectives of each rank a hang's report lists, the last one first."""
TAIL_ROWS = 256
"""The rows of each rank's ring a hang's report reads (the last calls are among them): a
few reads of its file, not its 5 MiB."""


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


def read_last_calls(run_dir: Path, rank: int) -> tuple[tuple[RingCall, ...], str]:
    """The rank's last calls from its ring in this node's run directory, and why not when
    its file is there but cannot be read (none and no note: no file here)."""
    path = ring_path(run_dir, rank)
    if not path.is_file():
        return (), ""
    try:
        return last_calls(read_ring_tail(path, TAIL_ROWS)), ""
    except RingError as exc:
        return (), str(exc)


def encode_calls(found: tuple[tuple[RingCall, ...], str]) -> bytes:
    """``read_last_calls``' answer as a relay sends it through the job's store."""
    return msgspec.json.encode(found)


def decode_calls(raw: bytes) -> tuple[tuple[RingCall, ...], str]:
    """``encode_calls`` read back; a value that is not one reads as none, with a note."""
    try:
        return msgspec.json.decode(raw, type=tuple[tuple[RingCall, ...], str])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return (), f"the relay's last calls did not read: {exc}"
