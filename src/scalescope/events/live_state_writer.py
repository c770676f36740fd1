"""The probe's side of a rank's live state file (events/live_state.py holds its layout and
its readers): a memory map of the file, updated in place on every phase change and every
collective's entry and exit, with no system call. Imports nothing heavy: the bootstrap opens
the file before torch is imported."""

from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

from scalescope.events.files import live_state_path
from scalescope.events.live_state import (
    COLLECTIVE,
    COLLECTIVE_AT,
    COLLECTIVE_NS_AT,
    DONE,
    DONE_AT,
    GROUP_SLOT,
    GROUP_SLOTS,
    GROUPS_AT,
    HEADER,
    HEADER_AT,
    IMPORT,
    LEFT,
    LEFT_AT,
    MAGIC,
    OUTSIDE,
    PHASE,
    PHASE_AT,
    PHASE_NS_AT,
    REQUEST,
    REQUEST_AT,
    RUNNING,
    SAMPLES_AT,
    SIZE,
    STAGE,
    STAGE_AT,
    STEP,
    STEP_AT,
    STEP_NS_AT,
    evenly_spaced,
    field_text,
)

_Q = struct.Struct("<q")


def process_started_perf_ns() -> int:
    """When this process started, on its ``perf_counter_ns`` clock (Linux: its start time in
    ``/proc/self/stat`` against ``CLOCK_BOOTTIME``, to the clock tick); elsewhere, now."""
    now = time.perf_counter_ns()
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime: clock ticks after boot
        age_s = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - int(max(age_s, 0.0) * 1e9)


class LiveStateWriter:
    """The probe's side: a memory map of the rank's state file, updated in place."""

    def __init__(self, path: Path, pid: int, wall_minus_perf_ns: int) -> None:
        path = self.path = Path(path).absolute()  # the C++ hooks map it after any chdir
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, SIZE)
            self._map: mmap.mmap | bytearray = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        HEADER.pack_into(self._map, HEADER_AT, MAGIC, pid, wall_minus_perf_ns)
        PHASE.pack_into(self._map, PHASE_AT, OUTSIDE.encode(), 0)
        self._stage_now = ""
        self.stage_listener: Callable[[str], None] | None = None
        """Told each stage written: another writer of this file (the probe's C++ hooks)
        may then write ``running`` itself, which ``stage_now`` reads back."""
        self._names: dict[str, bytes] = {}
        self._last: tuple[str, int] | None = None
        """Group and sequence of the collective last entered (as the map holds them)."""
        self._slots: dict[tuple[int, int, int], int] = {}
        """(first, stride, size) -> the offset of its slot."""

    def _b(self, name: str) -> bytes:
        raw = self._names.get(name)
        if raw is None:
            raw = self._names[name] = name.encode()[:48]
        return raw

    def phase(self, name: str, since_ns: int) -> None:
        PHASE.pack_into(self._map, PHASE_AT, self._b(name), since_ns)

    @property
    def stage_now(self) -> str:
        """The start stage last written ("" before any)."""
        shared = self._stage_now != RUNNING and self.stage_listener is not None
        if shared and field_text(STAGE.unpack_from(self._map, STAGE_AT)[0]) == RUNNING:
            self._stage_now = RUNNING
        return self._stage_now

    def stage(self, name: str, since_ns: int) -> None:
        STAGE.pack_into(self._map, STAGE_AT, name.encode()[:24], since_ns)
        self._stage_now = name
        if self.stage_listener is not None:
            self.stage_listener(name)

    def step(self, steps_done: int, end_ns: int) -> None:
        STEP.pack_into(self._map, STEP_AT, steps_done, end_ns)

    def enter(self, op: str, group: str, seq: int, nbytes: int, start_ns: int) -> None:
        COLLECTIVE.pack_into(
            self._map, COLLECTIVE_AT, self._b(op), self._b(group), seq, nbytes, start_ns, 0
        )
        self._last = (group, seq)

    def leave(self, group: str, seq: int, end_ns: int) -> None:
        """A collective completed: mark it left if it is the last one entered."""
        DONE.pack_into(self._map, DONE_AT, end_ns)
        if self._last == (group, seq):
            LEFT.pack_into(self._map, LEFT_AT, end_ns)

    def add_phase(self, name: str, dur_ns: int) -> None:
        """A phase of ``dur_ns`` ended: add it to its total (phases outside TOTAL_PHASES,
        such as a user's own, are not kept)."""
        at = PHASE_NS_AT.get(name)
        if at is not None:
            _add(self._map, at, dur_ns)

    def add_step(self, dur_ns: int, samples: int) -> None:
        _add(self._map, STEP_NS_AT, dur_ns)
        _add(self._map, SAMPLES_AT, samples)

    def add_collective(self, dur_ns: int) -> None:
        _add(self._map, COLLECTIVE_NS_AT, dur_ns)

    def group_slot(self, members: list[int], world_size: int) -> int:
        """The offset of the slot of the group of ``members`` (global ranks), taken at its
        first call; 0 (none) for a group of the world, of unevenly spaced members, or once
        every slot is taken."""
        key = evenly_spaced(members)
        if key is None or key[2] >= world_size:
            return 0
        at = self._slots.get(key)
        if at is None:
            if len(self._slots) >= GROUP_SLOTS:
                return 0
            at = self._slots[key] = GROUPS_AT + GROUP_SLOT.size * len(self._slots)
            GROUP_SLOT.pack_into(self._map, at, *key, 0, 0)
        return at

    def add_group_time(self, slot_at: int, dur_ns: int) -> None:
        if slot_at > 0:
            _add(self._map, slot_at + GROUP_SLOT.size - 8, dur_ns)

    def requests(self) -> tuple[int, int]:
        made, answered = REQUEST.unpack_from(self._map, REQUEST_AT)
        return made, answered

    def answered(self, count: int) -> None:
        struct.pack_into("<q", self._map, REQUEST_AT + 8, count)

    def close(self) -> None:
        """Unmap; later updates (a collective completing on another thread) go nowhere."""
        current, self._map = self._map, bytearray(SIZE)
        if isinstance(current, mmap.mmap):
            current.close()


def _add(buffer: mmap.mmap | bytearray, at: int, value: int) -> None:
    """Raise the total at ``at``: read and write by one writer thread per field, but
    ``add_collective`` runs on the threads that complete collectives, and the C++ hooks add
    to the same field under their own lock (a lost addition there is one collective)."""
    (now,) = _Q.unpack_from(buffer, at)
    _Q.pack_into(buffer, at, now + value)


def open_live_state(
    run_dir: Path, rank: int, pid: int | None = None, wall_minus_perf_ns: int | None = None
) -> LiveStateWriter:
    """The rank's state file, in stage ``import`` since the process started. Imports nothing
    heavy: the bootstrap opens it before torch is imported."""
    if wall_minus_perf_ns is None:
        wall_minus_perf_ns = time.time_ns() - time.perf_counter_ns()
    path = live_state_path(run_dir, rank)
    writer = LiveStateWriter(path, os.getpid() if pid is None else pid, wall_minus_perf_ns)
    writer.stage(IMPORT, process_started_perf_ns())
    return writer
