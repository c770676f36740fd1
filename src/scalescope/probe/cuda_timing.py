"""Device-side timing on CUDA, resolved without synchronising the training loop.

A host timestamp after an NCCL call, a forward or a backward only says when the work was
queued. Durations come from CUDA events instead: one recorded on the current stream at the
start and one at the end (for a collective, after it completes: a sync call makes the
current stream wait for NCCL's stream; an async call's future callback runs on a stream
synchronised with the work). Events are resolved with ``query()`` at flush time, so the
training loop never blocks on them; only ``resolve(wait=True)``, when the probe closes at
the end of the process, waits for the last ones.
"""

from __future__ import annotations

from typing import Any

import torch

_DUR = 4
"""Index of dur_ns in a recorder row."""


class CudaTimings:
    def __init__(self) -> None:
        self.pending: list[tuple[list, Any, Any]] = []
        self.on_resolved: Any = None
        """Told each row once its device time is in (the recorder's ``done``: the flight
        recorder takes a collective's row then)."""

    def start(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def span(self, row: list, start_event: Any, end_event: Any) -> None:
        """``row``'s duration is the device time between two recorded events; until it is
        known the row is pending (dur_ns None), so no flush writes the host's guess."""
        row[_DUR] = None
        self.pending.append((row, start_event, end_event))

    def finish(self, row: list, start_event: Any, work: Any) -> None:
        if work is None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.pending.append((row, start_event, end))
            return

        def done(_fut: Any) -> None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.pending.append((row, start_event, end))

        work.get_future().then(done)

    def resolve(self, wait: bool = False) -> None:
        """Fill in every row whose end event has completed (all of them with ``wait``, at
        the end of the process); keep the others for later."""
        still = []
        for row, start, end in self.pending:
            if wait:
                end.synchronize()
            if end.query():
                row[_DUR] = int(start.elapsed_time(end) * 1e6)
                if self.on_resolved is not None:
                    self.on_resolved(row)
            else:
                still.append((row, start, end))
        self.pending = still
