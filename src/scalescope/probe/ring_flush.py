"""At ``--record summary``, a flush request (a hang, ``scalescope flush``) also writes out the
rank's flight recorder: its ring's rows of the steps its stream holds only as summaries.

The stream writes every call's row only for the window steps (probe/windows.py); the ring
holds every row of the last 65,536. On a request, the steps written since the last such
copy (and the step in progress, whose calls the stream holds back until it ends) go to
``events/window-<first step>-rank-N.arrows``, as the slowdown watch's copy does
(events/ring_rows.py), for the what-if to replay beside the regular windows.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from scalescope.events.files import ring_path
from scalescope.events.flight_ring import RingError, read_ring
from scalescope.events.ring_rows import write_window
from scalescope.events.schema import Kind
from scalescope.probe.windows import Windows


class RingFlush:
    """Called by the live watch thread on each flush request, after the stream's flush."""

    def __init__(self, run_dir: Path, rank: int, windows: Windows, errors: list[str]) -> None:
        self.run_dir, self.rank, self.windows, self.errors = Path(run_dir), rank, windows, errors
        self.done_through = -1
        """The last ended step already copied (the step in progress is copied again)."""

    def __call__(self) -> None:
        try:
            ring = read_ring(ring_path(self.run_dir, self.rank)).whole_steps()
        except RingError as exc:
            self.errors.append(f"flight recorder not copied on a flush request: {exc}")
            return
        step = ring.records["step"]
        full = np.array([self.windows.full(int(s)) for s in np.unique(step)], dtype=bool)
        summarised = np.unique(step)[~full]
        kept = ring.records[(step > self.done_through) & np.isin(step, summarised)]
        if not len(kept):
            return
        try:
            write_window(self.run_dir, replace(ring, records=kept), int(kept["step"].min()))
        except Exception as exc:  # a full disk, a row Arrow refuses: the stream's flush stands
            self.errors.append(f"flight recorder not copied on a flush request: {exc}")
            return
        ended = kept["step"][kept["kind"] == Kind.STEP]
        self.done_through = max(self.done_through, int(ended.max()) if len(ended) else -1)
