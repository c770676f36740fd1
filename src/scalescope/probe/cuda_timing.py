"""Device-side timing of collectives on CUDA tensors (NCCL), resolved without synchronising.

A host timestamp after an NCCL call only says when the kernel was queued. The collective's
duration is taken from CUDA events: one recorded on the current stream before the call and
one after it completes (a sync call makes the current stream wait for NCCL's stream; an
async call's future callback runs on a stream synchronised with the work). Events are
resolved with ``query()`` at flush time, so the training loop never blocks on them.
"""

from __future__ import annotations

from typing import Any

import torch


class CudaTimings:
    def __init__(self) -> None:
        self.pending: list[tuple[list, Any, Any]] = []

    def start(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

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

    def resolve(self) -> None:
        """Fill in every row whose end event has completed; keep the others for later."""
        still = []
        for row, start, end in self.pending:
            if end.query():
                row[4] = int(start.elapsed_time(end) * 1e6)
            else:
                still.append((row, start, end))
        self.pending = still
