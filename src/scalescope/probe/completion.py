"""When a collective completed, as the host sees it, at the least cost per call.

An async collective (DDP's buckets, functional collectives, ``async_op=True``) completes
when its work's future does. A sync one completes when the caller's ``Work.wait`` returns:
the probe wraps that method, which costs less than a future callback and also serves the
works whose backend has no future (gloo's reduce-scatter, send and recv). A caller that
waits in C++ (DDP's coalesced broadcasts) issues its next collective only after the wait,
so the thread's next collective, or the caller's return (``settle``), completes it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch.distributed as dist

from scalescope.probe.recorder import Recorder

_DUR = 4
"""Index of dur_ns in a recorder row."""


class HostCompletions:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._awaiting: dict[int, tuple[Any, list]] = {}
        """id(work) -> (work, row) of sync collectives whose wait is still to come."""
        self._local = threading.local()
        self._saved_wait: Any = None

    def install(self) -> None:
        work_class = getattr(dist, "Work", None)
        if work_class is None or self._saved_wait is not None:
            return
        self._saved_wait = original = work_class.wait
        awaiting, completed = self._awaiting, self.recorder.completed

        def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(work, *args, **kwargs)
            entry = awaiting.pop(id(work), None)
            if entry is not None and entry[1][_DUR] is None:
                completed(entry[1], time.perf_counter_ns())
            return result

        work_class.wait = wait

    def uninstall(self) -> None:
        if self._saved_wait is not None:
            dist.Work.wait = self._saved_wait
            self._saved_wait = None
        self._awaiting.clear()

    def watch(self, row: list, work: Any, async_op: bool) -> None:
        """Complete ``row`` when ``work`` does (a None work: it is done)."""
        if work is None:
            self.recorder.completed(row, time.perf_counter_ns())
            return
        if async_op and self._on_future(row, work):
            return
        self._awaiting[id(work)] = (work, row)
        if not async_op:
            self._local.last = work

    def _on_future(self, row: list, work: Any) -> bool:
        recorder = self.recorder
        try:
            future = work.get_future()
        except RuntimeError:  # this backend's work has no future: its wait completes it
            return False
        future.add_done_callback(lambda _f: recorder.completed(row, time.perf_counter_ns()))
        return True

    def settle(self) -> None:
        """The thread's last sync collective was waited for: complete it now if its wait
        did not (issued by a caller that waits in C++)."""
        work = getattr(self._local, "last", None)
        if work is None:
            return
        self._local.last = None
        entry = self._awaiting.pop(id(work), None)
        if entry is not None and entry[1][_DUR] is None:
            self.recorder.completed(entry[1], time.perf_counter_ns())
