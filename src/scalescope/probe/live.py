"""The rank's live state (events/live_state.py), its flush-on-request thread and its stacks.

``faulthandler`` dumps every thread's Python stack on ``STACK_SIGNAL`` from C, so it works
while the main thread is blocked inside a collective (where a Python signal handler would
never run). The watch thread wakes twice a second; when a reader asks for a flush (a hang
was seen) it writes the recorder's completed rows, so they are on disk before anyone kills
the rank.
"""

from __future__ import annotations

import faulthandler
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from scalescope.events.files import live_state_path, stack_path
from scalescope.events.live_state import (
    STACK_SIGNAL,
    LiveStateWriter,
)
from scalescope.probe.recorder import Recorder

POLL_S = 0.5
ORPHAN_GRACE_POLLS = 4
"""Polls (2 s) the main thread gets to end on the SIGTERM its launcher's death sent it
(bootstrap.end_with_parent) before the watch thread ends the rank itself: a main thread
blocked in C++ (a collective, a store connection) never runs its Python signal handler."""


class LiveProbe:
    def __init__(self, run_dir: Path, rank: int, pid: int, wall_minus_perf_ns: int) -> None:
        self.writer = LiveStateWriter(live_state_path(run_dir, rank), pid, wall_minus_perf_ns)
        self._stack_file: IO[str] | None = None
        self._stack_path = stack_path(run_dir, rank)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.recorder: Recorder | None = None
        self.parent = os.getppid()
        self.on_orphaned: Callable[[], None] | None = None
        """Called from the watch thread when the launcher is gone and the main thread did
        not end: it must record the rank's end and exit the process."""

    def start(self, recorder: Recorder) -> LiveProbe:
        self.recorder = recorder
        self._stack_file = open(self._stack_path, "a")  # noqa: SIM115 (open while we live)
        faulthandler.register(STACK_SIGNAL, file=self._stack_file, all_threads=True)
        self._thread = threading.Thread(target=self._watch, name="scalescope-live", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        orphaned = 0
        while not self._stop.wait(POLL_S):
            made, answered = self.writer.requests()
            if made > answered and self.recorder is not None:
                self.recorder.flush()
                self.writer.answered(made)
            if os.getppid() != self.parent:
                orphaned += 1
                if orphaned > ORPHAN_GRACE_POLLS and self.on_orphaned is not None:
                    self.on_orphaned()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * POLL_S)
        if self._stack_file is not None:
            faulthandler.unregister(STACK_SIGNAL)
            self._stack_file.close()
            self._stack_file = None
        self.writer.close()
