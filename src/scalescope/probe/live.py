"""The rank's live state (events/live_state.py), its flush-on-request thread and its stacks.

``faulthandler`` dumps every thread's Python stack on ``STACK_SIGNAL`` from C, so it works
while the main thread is blocked inside a collective (where a Python signal handler would
never run). The watch thread wakes twice a second; when a reader asks for a flush (a hang
was seen) it writes the recorder's completed rows, so they are on disk before anyone kills
the rank.

The start stage (``import``, ``init_process_group``, ``model``, ``running``) is written by
the bootstrap (``import`` from the process' start, before torch is imported:
``events.live_state_writer.open_live_state``), by ``StartStages`` around
``init_process_group``, and by the recorder (``running`` at the first step's first phase,
or at a step-less script's first collective).
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from scalescope.events.files import stack_path
from scalescope.events.live_state import INIT_PROCESS_GROUP, MODEL, RUNNING, STACK_SIGNAL
from scalescope.events.live_state_writer import LiveStateWriter, open_live_state
from scalescope.probe.recorder import Recorder

POLL_S = 0.5
ORPHAN_GRACE_POLLS = 4
"""Polls (2 s) the main thread gets to end on the SIGTERM its launcher's death sent it
(bootstrap.end_with_parent) before the watch thread ends the rank itself: a main thread
blocked in C++ (a collective, a store connection) never runs its Python signal handler."""


class StartStages:
    """``init_process_group`` wrapped: stage ``init_process_group`` while inside it (the
    rendezvous, the probe's clock exchange), ``model`` once it returned. Installed after
    ``ClockHooks`` and the group hooks, so it is the outermost wrapper."""

    def __init__(self, writer: LiveStateWriter) -> None:
        self.writer = writer
        self._saved: Any = None

    def install(self) -> None:
        import torch.distributed as dist

        original = self._saved = dist.init_process_group
        writer = self.writer

        @functools.wraps(original)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            if writer.stage_now == RUNNING:  # a group made again after the first step
                return original(*args, **kwargs)
            writer.stage(INIT_PROCESS_GROUP, time.perf_counter_ns())
            result = original(*args, **kwargs)
            writer.stage(MODEL, time.perf_counter_ns())
            return result

        dist.init_process_group = init_process_group

    def uninstall(self) -> None:
        import torch.distributed as dist

        if self._saved is not None:
            dist.init_process_group, self._saved = self._saved, None


STOP_GRACE_S = 3.0
"""After a SIGTERM or SIGINT, how long the main thread gets to end by its own handler before
the watch thread ends the rank: a main thread blocked in C++ never runs that handler."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class LiveProbe:
    def __init__(
        self,
        run_dir: Path,
        rank: int,
        pid: int,
        wall_minus_perf_ns: int,
        writer: LiveStateWriter | None = None,
    ) -> None:
        """``writer``: the state file the bootstrap opened before importing torch."""
        self.writer = writer or open_live_state(run_dir, rank, pid, wall_minus_perf_ns)
        self._stack_file: IO[str] | None = None
        self._stack_path = stack_path(run_dir, rank)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.recorder: Recorder | None = None
        self.parent = os.getppid()
        self.on_orphaned: Callable[[], None] | None = None
        """Called from the watch thread when the launcher is gone and the main thread did
        not end: it must record the rank's end and exit the process."""
        self.on_stopped: Callable[[int], None] | None = None
        """Called from the watch thread with the signal when a SIGTERM or SIGINT arrived
        STOP_GRACE_S ago and the main thread did not end: record the end and exit."""
        self.on_flush: Callable[[], None] | None = None
        """Called on a flush request after the recorder's flush, before the answer (at
        ``--record summary``: the ring's summarised steps copied, probe/ring_flush.py)."""
        self._wake: tuple[int, int] | None = None
        self._old_wake = -1
        self._signalled: tuple[int, float] | None = None

    def start(self, recorder: Recorder) -> LiveProbe:
        self.recorder = recorder
        self._stack_file = open(self._stack_path, "a")  # noqa: SIM115 (open while we live)
        faulthandler.register(STACK_SIGNAL, file=self._stack_file, all_threads=True)
        self._listen_for_signals()
        self._thread = threading.Thread(target=self._watch, name="scalescope-live", daemon=True)
        self._thread.start()
        return self

    def _listen_for_signals(self) -> None:
        """Python writes each signal's number to a wakeup fd from its C handler, even while
        the main thread is blocked in C++: the watch thread reads it (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        try:
            self._old_wake = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:
            os.close(read)
            os.close(write)
            return
        self._wake = (read, write)

    def _stop_signal(self) -> None:
        if self._wake is None:
            return
        try:
            got = os.read(self._wake[0], 64)
        except (BlockingIOError, OSError):
            got = b""
        stops = [b for b in got if b in STOP_SIGNALS]
        if stops and self._signalled is None:
            self._signalled = (stops[0], time.monotonic())
        if self._signalled is not None and self.on_stopped is not None:
            signum, at = self._signalled
            if time.monotonic() - at >= STOP_GRACE_S:
                self.on_stopped(signum)

    def _watch(self) -> None:
        orphaned = 0
        while not self._stop.wait(POLL_S):
            recorder = self.recorder
            if recorder is not None and recorder.sink is not None and recorder.row_sources:
                recorder.collect()  # the C++ hooks' finished rows reach the ring within POLL_S
            made, answered = self.writer.requests()
            if made > answered and self.recorder is not None:
                self.recorder.flush()
                if self.on_flush is not None:
                    self.on_flush()
                self.writer.answered(made)
            if os.getppid() != self.parent:
                orphaned += 1
                if orphaned > ORPHAN_GRACE_POLLS and self.on_orphaned is not None:
                    self.on_orphaned()
            self._stop_signal()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * POLL_S)
        if self._wake is not None and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError):
                signal.set_wakeup_fd(self._old_wake)
            for fd in self._wake:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake = None
        if self._stack_file is not None:
            faulthandler.unregister(STACK_SIGNAL)
            self._stack_file.close()
            self._stack_file = None
        self.writer.close()
