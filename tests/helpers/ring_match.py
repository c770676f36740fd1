"""A rank's flight-ring rows against its stream's rows of the same steps, at either
``--record`` level: the ring always holds full rows, the stream at ``--record summary`` holds
a step's calls as SUMMARY rows outside the windows (probe/windows.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from scalescope.events import Kind
from scalescope.events.schema import ROW_FIELDS, WAIT_PREFIX
from scalescope.probe.summary import size_class

CALLS = (int(Kind.COLLECTIVE), int(Kind.WAIT))
SUMMARY = int(Kind.SUMMARY)
F = {name: i for i, name in enumerate(ROW_FIELDS)}


def _folded(calls: Iterable[tuple]) -> Counter:
    """Calls, nbytes and time per (group, name, size class, peer), as a SUMMARY row sums
    them (a WAIT row's name as ``wait:<op>``)."""
    sums: Counter = Counter()
    for r in calls:
        name = r[F["name"]] if r[F["kind"]] == Kind.COLLECTIVE else WAIT_PREFIX + r[F["name"]]
        key = (r[F["group"]], name, size_class(r[F["nbytes"]]), r[F["peer"]])
        sums[(*key, "calls")] += 1
        sums[(*key, "nbytes")] += r[F["nbytes"]]
        sums[(*key, "dur_ns")] += r[F["dur_ns"]]
    return sums


def _summed(summaries: Iterable[tuple]) -> Counter:
    sums: Counter = Counter()
    for r in summaries:
        key = (r[F["group"]], r[F["name"]], r[F["seq"]], r[F["peer"]])
        sums[(*key, "calls")] += r[F["count"]]
        sums[(*key, "nbytes")] += r[F["nbytes"]]
        sums[(*key, "dur_ns")] += r[F["dur_ns"]]
    return sums


def assert_ring_matches_stream(ring: list[tuple], stream: list[tuple], steps: Iterable[int]):
    """Rows as ``ROW_FIELDS`` tuples. On each step, the ring's phases, steps and memory rows
    are the stream's; its calls are the stream's calls where the stream holds them (a window,
    or ``--record full``), else they add up exactly to the stream's SUMMARY rows."""
    for step in steps:
        mine = [r for r in ring if r[0] == step]
        theirs = [r for r in stream if r[0] == step]
        other = sorted(r for r in mine if r[1] not in CALLS)
        assert other == sorted(r for r in theirs if r[1] not in (*CALLS, SUMMARY)), f"step {step}"
        calls = sorted(r for r in mine if r[1] in CALLS)
        written = sorted(r for r in theirs if r[1] in CALLS)
        summaries = [r for r in theirs if r[1] == SUMMARY]
        if written or not summaries:
            assert calls == written, f"step {step}"
        else:
            assert _folded(calls) == _summed(summaries), f"step {step}: the summaries"
