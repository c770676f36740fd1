"""One record per node in the job's store, beside its ranks' live states: what ``top
--connect`` and the metrics need of a node's ranks, reduced by the node's relay
(launch/channel/relay.py), so that a frame or a scrape at 16,384 ranks reads 1,024 records
rather than 16,384 states (docs/many-ranks.md).

The relay reduces the states it has just read: the ranks' steps done (fewest, with its rank,
and most), their last step end and progress, how many are in a collective and the one that
entered its collective first, how many are still starting, the running totals summed, and per
op and group the sums over its ranks of the last completed collective's size and bandwidth
(what launch/metrics/rows.py ``node_ops`` averages). It is sealed with the relay's index like
the states with their rank (launch/channel/store.py ``Channel.node_records``); a reader of
another ``VERSION`` passes it over and reads the node's ranks' states instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from scalescope.events.live_state import TOTAL_PHASES, LiveState

VERSION = 1

OpsSeen = Mapping[tuple[str, str], tuple[int, float]]
"""(op, group) -> (bytes, seconds) of a rank's last completed collective of that op and group."""


class Oldest(msgspec.Struct, frozen=True):
    """The rank of the node in a collective since the earliest moment, and that collective."""

    rank: int
    op: str
    group: str
    seq: int
    entered_s: float


class NodeTotals(msgspec.Struct, frozen=True):
    """The running totals (events/live_state.py ``LiveTotals``) of the node's ranks that have
    them, summed; ``steps`` their steps done, ``ranks`` how many."""

    ranks: int
    steps: int
    step_ns: int
    samples: int
    collective_ns: int
    phase_ns: tuple[int, ...]
    """By TOTAL_PHASES, in that order."""


class NodeOp(msgspec.Struct, frozen=True):
    """The node's ranks' last completed collective of one op and group: how many ranks were
    seen in one, their sizes and bandwidths (bytes/s) summed, and one of those ranks (whose
    meta file names the group's members)."""

    op: str
    group: str
    rank: int
    count: int
    nbytes: float
    bw: float


class NodeRecord(msgspec.Struct, frozen=True):
    """A node's ranks as its relay read them at ``at_s`` (wall-clock seconds)."""

    v: int
    host: str
    at_s: float
    ranks: tuple[int, ...]
    """The ranks whose states this record reduces."""
    steps_min: int
    slowest: int
    """The rank with the fewest steps done (the lowest such rank)."""
    steps_max: int
    last_step_end_s: float | None
    last_progress_s: float | None
    """The latest end of a step or a collective among the ranks (LiveState.last_progress_s)."""
    in_collective: int
    oldest: Oldest | None
    starting: int
    """Ranks that have not done a step and are at a start stage other than ``running``."""
    totals: NodeTotals | None
    ops: tuple[NodeOp, ...] = ()


def node_record(
    host: str, at_s: float, states: Mapping[int, LiveState], ops: Mapping[int, OpsSeen]
) -> NodeRecord | None:
    """The record of ``states`` (a node's, by rank) and the collectives seen completed
    (``ops``, by rank); None without a state."""
    if not states:
        return None
    ordered = [states[r] for r in sorted(states)]
    slowest = min(ordered, key=lambda s: (s.steps_done, s.rank))
    inside = [s for s in ordered if s.in_collective]
    first = min(inside, key=lambda s: (s.entered_s or 0.0, s.rank)) if inside else None
    return NodeRecord(
        v=VERSION, host=host, at_s=at_s, ranks=tuple(s.rank for s in ordered),
        steps_min=slowest.steps_done, slowest=slowest.rank,
        steps_max=max(s.steps_done for s in ordered),
        last_step_end_s=_latest(s.last_step_end_s for s in ordered),
        last_progress_s=_latest(s.last_progress_s for s in ordered),
        in_collective=len(inside),
        oldest=None if first is None else Oldest(
            first.rank, first.op, first.group, first.seq, first.entered_s or 0.0
        ),
        starting=sum(s.starting for s in ordered), totals=node_totals(ordered),
        ops=node_ops_seen({r: ops[r] for r in sorted(ops) if r in states}),
    )  # fmt: skip


def _latest(times) -> float | None:
    return max((t for t in times if t is not None), default=None)


def node_totals(states: list[LiveState]) -> NodeTotals | None:
    having = [(s.steps_done, s.totals) for s in states if s.totals is not None]
    if not having:
        return None
    return NodeTotals(
        ranks=len(having), steps=sum(steps for steps, _ in having),
        step_ns=sum(t.step_ns for _, t in having), samples=sum(t.samples for _, t in having),
        collective_ns=sum(t.collective_ns for _, t in having),
        phase_ns=tuple(sum(t.phase_ns[p] for _, t in having) for p in TOTAL_PHASES),
    )  # fmt: skip


def node_ops_seen(ops: Mapping[int, OpsSeen]) -> tuple[NodeOp, ...]:
    """Per (op, group), the ranks' last completed collectives summed (ranks in order)."""
    found: dict[tuple[str, str], list[tuple[int, int, float]]] = {}
    for rank, seen in ops.items():
        for (op, group), (nbytes, seconds) in seen.items():
            found.setdefault((op, group), []).append((rank, nbytes, seconds))
    return tuple(
        NodeOp(
            op,
            group,
            same[0][0],
            len(same),
            float(sum(b for _, b, _ in same)),
            sum(b / s for _, b, s in same),
        )  # fmt: skip
        for (op, group), same in sorted(found.items())
    )


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(NodeRecord)


def encode(record: NodeRecord) -> bytes:
    return _ENCODER.encode(record)


def decode(raw: bytes) -> NodeRecord | None:
    """The record in ``raw``; None when it is not one of this ``VERSION`` (garbage, a newer
    relay's: the reader then reads the node's ranks' states)."""
    try:
        record = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return record if record.v == VERSION else None


def current(records: Mapping[int, NodeRecord]) -> dict[int, NodeRecord]:
    """The records to believe of those read, by relay index: where two claim a rank (a relay
    that died and the sibling that took its node over), the fresher one; the older one is
    left out whole."""
    out: dict[int, NodeRecord] = {}
    claimed: set[int] = set()
    for index, record in sorted(records.items(), key=lambda item: -item[1].at_s):
        if claimed.isdisjoint(record.ranks):
            out[index] = record
            claimed.update(record.ranks)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class NodesRead:
    """One read of the nodes' records: those to believe (``current``), and the relays whose
    record did not open with the job's seal or was a replay (their ranks are read one by
    one)."""

    records: tuple[NodeRecord, ...] = ()
    unknown: tuple[int, ...] = ()
