"""CPU time beside each phase boundary's wall time: what tells a phase that waited (asleep, on
I/O, on a lock, or runnable behind another process on shared cores) from one that computed.

``now()`` stands in for ``time.perf_counter_ns()`` at a phase's start and end; the phase's
row then gets a CPU row (events/schema.py ``Kind.CPU``): the process's CPU ns over the phase
(all its threads: the intra-op pool, gloo's, NCCL's) and the training thread's. Each reading
is a ``clock_gettime`` (~0.5 us, two a boundary).
"""

from __future__ import annotations

import threading
import time

KEPT = 256
"""Readings held for phases still open; the oldest are dropped past this (boundaries that
never became a phase's start or end: a forward the loop called outside a step)."""
KEPT_AFTER_TRIM = 64


def _thread_clock() -> int | None:
    """The calling thread's CPU clock id, readable from any thread (a hook on autograd's
    device thread still reads the training thread's time); None where there is none."""
    getter = getattr(time, "pthread_getcpuclockid", None)
    if getter is None:
        return None
    try:
        clock = getter(threading.get_ident())
        time.clock_gettime_ns(clock)
    except (OSError, AttributeError):
        return None
    return clock


class CpuClock:
    """The training thread is the one that reads the first boundary (a batch's fetch or the
    first forward: the loop's thread, whichever thread installed the probe); its CPU clock is
    read from then on, from any thread."""

    def __init__(self) -> None:
        self.thread_clock: int | None = None
        self._bound = False
        self.at: dict[int, tuple[int, int]] = {}
        """Wall ns of a boundary -> (process CPU ns, training thread CPU ns or -1)."""
        self._latest: dict[str, int] = {}

    def now(self, latest: str = "") -> int:
        """``time.perf_counter_ns()``, with the CPU clocks read beside it. ``latest``: a
        boundary of which only the last counts (DDP's gradient buckets: the last one ends
        backward's compute), whose earlier reading this one replaces; a model of a thousand
        buckets keeps one, not a thousand that would push out backward's start."""
        if not self._bound:
            self.thread_clock, self._bound = _thread_clock(), True
        wall = time.perf_counter_ns()
        clock = self.thread_clock
        thread = time.clock_gettime_ns(clock) if clock is not None else -1
        if latest:
            self.at.pop(self._latest.get(latest, -1), None)
            self._latest[latest] = wall
        self.at[wall] = (time.process_time_ns(), thread)
        if len(self.at) > KEPT:
            for key in list(self.at)[:-KEPT_AFTER_TRIM]:
                self.at.pop(key, None)
        return wall

    def spent(self, start_ns: int, end_ns: int) -> tuple[int, int] | None:
        """(process CPU ns, training thread CPU ns or -1) from ``start_ns`` to ``end_ns``,
        both read by ``now``; None when either was not. The start is forgotten (a phase's
        end may start the next one)."""
        first = self.at.pop(start_ns, None)
        last = self.at.get(end_ns)
        if first is None or last is None:
            return None
        process = max(last[0] - first[0], 0)
        thread = max(last[1] - first[1], 0) if first[1] >= 0 and last[1] >= 0 else -1
        return process, thread
