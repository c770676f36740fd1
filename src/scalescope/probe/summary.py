"""``--record summary``: each step's collectives folded into a few SUMMARY rows.

One row per step per (group, op, size class, peer): the calls' bytes, count, time in the call
and arrival offsets from the step's start, summed (events/schema.py ``Kind.SUMMARY``,
docs/schema.md). The host's waits on sends and receives (WAIT rows) fold the same way under
the name ``wait:<op>``. A window step's rows (probe/windows.py) are written in full as well,
so every step has its summary and the windows check it exactly.

Summary rows add up: a call that completes after its step's summary was written (an async
collective waited on a step later) gets a row of its own with the same key, and a reader sums
the rows of one key. Rows of a step that never ended (the last, on a crash or a hang) and
calls that never completed are written in full, not summarised: they are what a hang's
analysis reads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Set

from scalescope.events.schema import WAIT_PREFIX, Kind
from scalescope.probe.windows import Windows

COLLECTIVE, SUMMARY = int(Kind.COLLECTIVE), int(Kind.SUMMARY)
FOLDED = (COLLECTIVE, int(Kind.WAIT))
MIXED = "*"
"""A summary's dtype or tag where its calls' differ (after the common ``prefix:``)."""
STARTS_KEPT = 64
"""Steps whose start is remembered for late calls (an async call completes within a few)."""


def size_class(nbytes: int) -> int:
    """floor(log2(bytes per call)); -1 for a call of no bytes."""
    return int(nbytes).bit_length() - 1 if nbytes > 0 else -1


def joined(distinct: Set[str]) -> str:
    """The calls' common value; else their common ``prefix:`` and ``*`` (FSDP's
    ``unshard:blocks.0``, ``unshard:blocks.1`` -> ``unshard:*``); else ``*``."""
    if len(distinct) == 1:
        return next(iter(distinct))
    prefixes = {v.split(":", 1)[0] for v in distinct if ":" in v}
    if len(prefixes) == 1 and all(":" in v for v in distinct):
        return f"{prefixes.pop()}:{MIXED}"
    return MIXED


def fold_step(step: int, start_ns: int, rows: Iterable[tuple]) -> list[tuple]:
    """One step's COLLECTIVE and WAIT rows as SUMMARY rows, in the order of each key's first
    call. ``start_ns``: the step's start (its STEP row's). A call that never completed
    (``dur_ns`` -1) would count as a call of no time (StepSummaries writes it in full
    instead). One pass, a list of sums per key: this runs
    at every flush over every call (~2 us a call, docs/probe.md)."""
    sums: dict[tuple, list] = {}
    for row in rows:
        name = row[2] if row[1] == COLLECTIVE else WAIT_PREFIX + row[2]
        nbytes = row[5]
        key = (row[8], name, nbytes.bit_length() - 1 if nbytes > 0 else -1, row[11])
        acc = sums.get(key)
        if acc is None:
            sums[key] = [row[3], max(row[4], 0), nbytes, 1, {row[7]}, {row[10]}]
        else:
            acc[0] += row[3]
            acc[1] += max(row[4], 0)
            acc[2] += nbytes
            acc[3] += 1
            acc[4].add(row[7])
            acc[5].add(row[10])
    return [
        (step, SUMMARY, name, offsets - start_ns * n, dur, nbytes, n, joined(dtypes), group,
         klass, joined(tags), peer)
        for (group, name, klass, peer), (offsets, dur, nbytes, n, dtypes, tags) in sums.items()
    ]  # fmt: skip


class StepSummaries:
    """The recorder's flush hook (``Recorder.fold``): the completed rows in, the rows to
    write out. A step's calls wait here until its STEP row (its start) has passed."""

    def __init__(self, windows: Windows) -> None:
        self.windows = windows
        self.starts: dict[int, int] = {}
        self.held: dict[int, list[tuple]] = defaultdict(list)

    def __call__(self, rows: list[tuple], final: bool = False) -> list[tuple]:
        out, ready = [], defaultdict(list)
        for row in rows:
            if row[1] == Kind.STEP:
                self.starts[row[0]] = row[3]
        for row in rows:
            if row[1] not in FOLDED:
                out.append(row)
                continue
            step = row[0]
            if self.windows.full(step) or row[4] < 0:
                out.append(row)
            if row[4] < 0:  # never completed (the final flush): what a hang's analysis reads
                continue
            (ready if step in self.starts else self.held)[step].append(row)
        for step in [s for s in self.held if s in self.starts]:
            ready[step].extend(self.held.pop(step))
        for step, calls in sorted(ready.items()):
            out.extend(fold_step(step, self.starts[step], calls))
        if final:  # a step that never ended: its calls in full (those not written already)
            out.extend(
                r for s, calls in self.held.items() if not self.windows.full(s) for r in calls
            )
            self.held.clear()
        self._forget()
        return out

    def _forget(self) -> None:
        if len(self.starts) > STARTS_KEPT:
            for step in sorted(self.starts)[:-STARTS_KEPT]:
                del self.starts[step]
