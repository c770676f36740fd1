"""Per-rank event buffer: the probe's hot path appends here; steps end and flush here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scalescope.events.live_state import INIT_PROCESS_GROUP, OUTSIDE, RUNNING
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.events.schema import Kind
from scalescope.events.writer import EventWriter
from scalescope.probe.cpu_clock import CpuClock
from scalescope.probe.memory import MemoryPeak

_DONE = 4
"""Index of dur_ns in a row list; None there means the collective has not completed."""
SETUP_TAGS = frozenset({"parameters"})
"""Collectives of building the model (DDP's broadcast of the parameters at construction):
they leave the start stage ``model`` as it is."""
KEPT_STAGES = (RUNNING, INIT_PROCESS_GROUP)
"""Start stages a collective does not end (one inside ``init_process_group``)."""


@dataclass(frozen=True)
class WaitNote:
    """What a WAIT row holds besides its times: the send's or recv's op, group, tag, peer,
    its index among this rank's ops of that name with that peer on that group, its bytes."""

    op: str
    group: str
    tag: str
    peer: int
    index: int
    nbytes: int
    count: int
    dtype: str


class Recorder:
    """Rows are lists (step, kind, name, start_ns, dur_ns, nbytes, count, dtype, group, seq, tag,
    peer).

    Collectives are appended at issue with ``dur_ns`` None and completed later from the
    work's callback thread; ``flush`` writes completed rows and keeps the rest.
    """

    def __init__(
        self,
        events_file: Path,
        rank: int,
        flush_every_steps: int = 20,
        flush_every_s: float = 5,
        compression: str | None = None,
    ) -> None:
        self.writer = EventWriter(events_file, rank, compression)
        self.rank = rank
        self.step = 0
        self.step_start_ns: int | None = None
        self.loader_samples = 0
        """Samples of the DataLoader batches of the current step."""
        self.forward_samples = 0
        """Leading dimension of the DDP module's inputs in the current step: counted when
        the step saw no DataLoader batch."""
        self.rows: list[list] = []
        self.flush_every_steps = flush_every_steps
        self.flush_every_ns = int(flush_every_s * 1e9)
        self._last_flush_ns = time.perf_counter_ns()
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self.memory = MemoryPeak()
        self.cpu = CpuClock()
        """Phase boundaries read the CPU clocks: the process's and the training thread's."""
        self.errors: list[str] = []
        self.before_flush: list[Callable[[], None]] = []
        self.after_flush: list[Callable[[], None]] = []
        self.flushing_in: int | None = None
        """The thread writing rows out, while it does: a signal's handler on that thread
        defers its exception until ``after_flush`` (raised mid-write, it lost the rows taken)."""
        self.row_sources: list[Callable[[bool], list[list]]] = []
        """Rows kept elsewhere (the C++ hooks'), taken at each flush: the finished ones, all
        on the final flush."""
        self.fold: Callable[[list[tuple], bool], list[tuple]] | None = None
        """At ``--record summary``: the completed rows in, the rows to write out
        (probe/summary.py ``StepSummaries``); None writes every row as it is."""
        self.before_step_end: list[Callable[[], None]] = []
        """Called as a step ends, before its row is written (samples still counting)."""
        self.on_step: Callable[[int], None] | None = None
        """Told the step number each time a step ends."""
        self.live: LiveStateWriter | None = None
        self.sink: Callable[[list], None] | None = None
        """Told each row as it completes (the flight recorder, probe/flight_ring.py): a
        collective at its completion, the C++ hooks' rows as ``collect`` takes them (at each
        step's end, and from the live watch thread twice a second)."""
        self.group_slot: Callable[[str], int] = lambda label: 0
        """A group label's time slot in the live state (probe/collectives.py
        ``GroupNames.live_slot``)."""
        """Kept current on phase changes and collectives (events/live_state.py)."""
        self._flush_lock = threading.Lock()
        self._steps_flushed = 0
        """One past the last step row flushed: a signal that lands between ``end_step``'s
        append and its ``step += 1`` leaves a written step the counter missed."""

    def enter_phase(self, name: str, start_ns: int) -> None:
        live = self.live
        if live is not None:
            if live.stage_now != RUNNING:  # the first step's first phase
                live.stage(RUNNING, start_ns)
            live.phase(name, start_ns)

    def now(self, latest: str = "") -> int:
        """``time.perf_counter_ns()`` at a phase boundary, with the CPU clocks read beside it:
        a phase whose start and end both came from here gets a CPU row (``latest``:
        ``CpuClock.now``'s)."""
        return self.cpu.now(latest)

    def phase(self, name: str, start_ns: int, end_ns: int) -> list:
        """Append a phase row and return it (CUDA timing replaces its dur_ns later)."""
        if self.step_start_ns is None:
            self.step_start_ns = start_ns
        row = [self.step, Kind.PHASE, name, start_ns, end_ns - start_ns, 0, 0, "", "", -1, "", -1]
        self.rows.append(row)
        spent = self.cpu.spent(start_ns, end_ns)
        cpu = None
        if spent is not None:
            process, thread = spent
            wall = end_ns - start_ns
            cpu = [self.step, Kind.CPU, name, start_ns, wall, 0, process, "", "", thread, "", -1]
            self.rows.append(cpu)
        if self.sink is not None:
            self.sink(row)
            if cpu is not None:
                self.sink(cpu)
        if self.live is not None:
            self.live.phase(OUTSIDE, end_ns)
            self.live.add_phase(name, end_ns - start_ns)
        return row

    def collective(
        self,
        op: str,
        nbytes: int,
        count: int,
        dtype: str,
        group: str,
        tag: str,
        start_ns: int,
        peer: int = -1,
    ) -> list:
        """Append an issued collective; the caller sets ``row[4]`` (dur_ns) on completion.
        ``peer``: a send's or recv's partner (global rank)."""
        with self._lock:
            seq = self._seq.get(group, 0)
            self._seq[group] = seq + 1
            row = [
                self.step,
                Kind.COLLECTIVE,
                op,
                start_ns,
                None,
                nbytes,
                count,
                dtype,
                group,
                seq,
                tag,
                peer,
            ]
            self.rows.append(row)
        live = self.live
        if live is not None:
            if live.stage_now not in KEPT_STAGES and tag not in SETUP_TAGS:
                live.stage(RUNNING, start_ns)  # a script without steps: its first collective
            live.enter(op, group, seq, nbytes, start_ns)
        return row

    def completed(self, row: list, end_ns: int) -> None:
        """A collective's row is done at ``end_ns`` (called from any thread)."""
        row[_DONE] = end_ns - row[3]
        if self.sink is not None:
            self.sink(row)
        self.left(row, end_ns)

    def done(self, row: list) -> None:
        """A row whose duration its caller set (DDP's shared broadcast, a device's time)."""
        if self.sink is not None:
            self.sink(row)

    def left(self, row: list, end_ns: int) -> None:
        """The host left a collective (its duration may be resolved later, on a device)."""
        live = self.live
        if live is not None:
            live.leave(row[8], row[9], end_ns)
            live.add_collective(end_ns - row[3])
            live.add_group_time(self.group_slot(row[8]), end_ns - row[3])

    def waited(self, note: WaitNote, start_ns: int, end_ns: int) -> None:
        """The host waited on a send's or recv's work from ``start_ns`` to ``end_ns``."""
        n = note
        row = [
            self.step, Kind.WAIT, n.op, start_ns, end_ns - start_ns, n.nbytes, n.count, n.dtype,
            n.group, n.index, n.tag, n.peer,
        ]  # fmt: skip
        with self._lock:
            self.rows.append(row)
        if self.sink is not None:
            self.sink(row)

    def end_step(self, end_ns: int) -> None:
        for hook in self.before_step_end:
            hook()
        start = self.step_start_ns if self.step_start_ns is not None else end_ns
        samples = self.loader_samples or self.forward_samples
        step_row = [
            self.step,
            Kind.STEP,
            "step",
            start,
            end_ns - start,
            0,
            samples,
            "",
            "",
            -1,
            "",
            -1,
        ]
        with self._lock:  # the watch thread may be taking the rows for a flush
            self.rows.append(step_row)
        peak = self.memory.read_and_reset()
        step_rows = [step_row]
        if peak is not None:
            step_rows.append(
                [self.step, Kind.MEMORY, peak[0], start, 0, peak[1], 0, "", "", -1, "", -1]
            )
            with self._lock:
                self.rows.append(step_rows[-1])
        if self.sink is not None:
            for row in step_rows:
                self.sink(row)
        self.step += 1
        self.step_start_ns = end_ns
        if self.on_step is not None:
            self.on_step(self.step)
        if self.live is not None:
            if self.live.stage_now != RUNNING:
                self.live.stage(RUNNING, start)
            self.live.step(self.step, end_ns)
            self.live.add_step(end_ns - start, samples)
        self.loader_samples = self.forward_samples = 0
        if self.sink is not None and self.row_sources:
            self.collect()  # the C++ hooks' rows of the step into the ring (the flush's work)
        if (
            self.step % self.flush_every_steps == 0
            or end_ns - self._last_flush_ns > self.flush_every_ns
        ):
            self.flush()

    def collect(self, final: bool = False) -> None:
        """Take the rows of ``row_sources`` into ``rows``."""
        taken = [row for source in self.row_sources for row in source(final)]
        if taken:
            with self._lock:
                self.rows.extend(taken)
            if self.sink is not None:
                for row in taken:
                    if row[_DONE] is not None:
                        self.sink(row)

    def flush(self, final: bool = False) -> None:
        """Write completed rows; on ``final`` write incomplete collectives with dur_ns -1."""
        with self._flush_lock:
            self.flushing_in = threading.get_ident()
            try:
                self._flush(final)
            finally:
                self.flushing_in = None
        for hook in self.after_flush:
            hook()

    def _flush(self, final: bool) -> None:
        for hook in self.before_flush:
            hook()
        self.collect(final)
        with self._lock:
            rows, self.rows = self.rows, []
        done, pending = [], []
        for row in rows:
            if row[_DONE] is None and not final:
                pending.append(row)
            else:
                done.append(tuple(row) if row[_DONE] is not None else (*row[:_DONE], -1, *row[5:]))
                if row[1] == Kind.STEP:
                    self._steps_flushed = max(self._steps_flushed, row[0] + 1)
        with self._lock:
            self.rows[:0] = pending
        if self.fold is not None:
            done = self.fold(done, final)
        try:
            self.writer.write(done)
        except Exception as exc:  # never break training because recording failed
            self.errors.append(f"event write failed: {exc}")
        self._last_flush_ns = time.perf_counter_ns()

    def close(self) -> None:
        self.flush(final=True)
        self.step = max(self.step, self._steps_flushed)
        try:
            self.writer.close()
        except Exception as exc:  # a full disk: the batches written before are kept
            self.errors.append(f"event file close failed: {exc}")
