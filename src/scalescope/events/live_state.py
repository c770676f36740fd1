"""Each rank's live state: one small fixed-layout file the probe keeps current in place.

The event stream is flushed in batches (every 20 steps or 5 s), so a rank stuck between
flushes says nothing there. The probe therefore also writes, on every phase change and every
collective's entry and exit, a few fields into ``live/rank-N.state`` through a shared memory
map (no system call, no flush: the page cache holds it; a reader on the same node sees it at
once; the writer: events/live_state_writer.py). Readers (the launcher's hang watch,
``scalescope top``) call ``read_live_states``.

Times in the file are the rank's ``perf_counter`` ns; the header holds the offset to its wall
clock, so ``LiveState`` gives wall-clock seconds comparable across processes.

The launcher may ask a rank to flush its events by raising ``flush_requests``; the probe's
watch thread answers it (see probe/live.py).

From byte ``TOTALS_AT`` on, running totals since the rank's first step (``LiveTotals``): its
steps' time, samples, time in collectives and each phase's time. A watcher that reads them
twice has the mean step and its phases over the steps between (the slowdown detection of
analyze/watch/slowdown.py), whatever the step's length and however rarely it reads. Files written
before they existed are ``OLD_SIZE`` bytes and read with no totals.

After the totals, ``GROUP_SLOTS`` slots of time in the collectives of one process group
smaller than the world whose members are evenly spaced (``first + i * stride``: pipeline and
tensor-parallel pairs, a DeviceMesh dimension, per-node groups): what names a slow link live
(analyze/watch/slowdown.py ``slow_link``). The probe fills a slot at the group's first collective
once its members are known; a rank in more such groups keeps the first ones.
"""

from __future__ import annotations

import mmap
import os
import signal
import struct
from dataclasses import dataclass, field
from pathlib import Path

from scalescope.events.files import live_dir, live_state_name, live_state_path

MAGIC = b"SSLIVE01"
SIZE = 512
OLD_SIZE = 256
"""The size of a file written before the totals (it reads with ``totals`` None)."""
HEADER = struct.Struct("<8sqq")
"""magic, pid, wall_minus_perf_ns."""
STEP = struct.Struct("<qq")
"""steps done, end of the last step (perf ns; 0 before the first)."""
PHASE = struct.Struct("<16sq")
"""phase now (``outside``: host work outside the recorded phases), since (perf ns)."""
COLLECTIVE = struct.Struct("<16s48sqqqq")
"""last collective entered: op, group, seq, nbytes, entered (perf ns), left (0: still in)."""
LEFT = struct.Struct("<q")
"""The ``left`` field of COLLECTIVE, written alone."""
DONE = struct.Struct("<q")
"""when any collective last completed (perf ns)."""
REQUEST = struct.Struct("<qq")
"""flush requests made by a reader, flush requests the rank answered."""
STAGE = struct.Struct("<24sq")
"""start stage (``import``, ``init_process_group``, ``model``, ``running``), since (perf ns).
Added after REQUEST in bytes earlier files left zero: a file without it reads stage ""."""

TOTAL_PHASES = (
    "data",
    "to_device",
    "forward",
    "backward",
    "comm_wait",
    "optimizer",
    "eval",
    "checkpoint",
)
"""The phases whose running time the file holds, in this order: events.schema's PHASES and
EXTRA_PHASES, named here since the bootstrap imports this module before pyarrow."""
TOTALS = struct.Struct(f"<qqq{len(TOTAL_PHASES)}q")
"""steps' time (ns), samples, time in collectives (ns, issue to completion), then each of
TOTAL_PHASES' time (ns): running sums from the first step."""
GROUP_SLOT = struct.Struct("<iiiiq")
"""A group's first member, stride and size (global ranks; size 0: a free slot), unused, and
the rank's running time in its collectives (ns)."""
GROUP_SLOTS = 7

HEADER_AT = 0
STEP_AT = HEADER_AT + HEADER.size
PHASE_AT = STEP_AT + STEP.size
COLLECTIVE_AT = PHASE_AT + PHASE.size
DONE_AT = COLLECTIVE_AT + COLLECTIVE.size
REQUEST_AT = DONE_AT + DONE.size
STAGE_AT = REQUEST_AT + REQUEST.size
LEFT_AT = COLLECTIVE_AT + COLLECTIVE.size - LEFT.size
TOTALS_AT = OLD_SIZE
STEP_NS_AT, SAMPLES_AT, COLLECTIVE_NS_AT = (TOTALS_AT + 8 * i for i in range(3))
PHASE_NS_AT = {name: TOTALS_AT + 8 * (3 + i) for i, name in enumerate(TOTAL_PHASES)}
GROUPS_AT = TOTALS_AT + TOTALS.size
assert STAGE_AT + STAGE.size <= OLD_SIZE and GROUPS_AT + GROUP_SLOTS * GROUP_SLOT.size <= SIZE

STACK_SIGNAL = signal.SIGUSR2
"""Sent to a rank to have it write its Python stacks (faulthandler) to ``stack_path``."""

OUTSIDE = "outside"
"""The phase name of host work outside data, forward, backward and optimizer."""

IMPORT = "import"
"""Start stage from the process' start: the bootstrap importing torch, the script its own
modules and whatever it does before ``init_process_group``."""
INIT_PROCESS_GROUP = "init_process_group"
"""Start stage while inside ``torch.distributed.init_process_group`` (the rendezvous)."""
MODEL = "model"
"""Start stage from the process group's creation to the first step: the model, DDP, data."""
RUNNING = "running"
"""Past starting: the first step began (its first phase), or a script without steps entered
a collective that is not DDP's broadcast of the parameters."""
STAGES = (IMPORT, INIT_PROCESS_GROUP, MODEL, RUNNING)


def field_text(raw: bytes) -> str:
    """A text field of the file: its bytes up to the NUL padding, as text."""
    return raw.rstrip(b"\0").decode("utf-8", "replace")


def evenly_spaced(members: list[int]) -> tuple[int, int, int] | None:
    """(first, stride, size) of a group of two or more ranks ``first + i * stride``, in any
    order; None for any other."""
    ranks = sorted(set(members))
    if len(ranks) < 2 or len(ranks) != len(members):
        return None
    stride = ranks[1] - ranks[0]
    if any(b - a != stride for a, b in zip(ranks, ranks[1:], strict=False)):
        return None
    return ranks[0], stride, len(ranks)


@dataclass(frozen=True)
class LiveTotals:
    """A rank's running totals from its first step (durations in ns)."""

    step_ns: int
    samples: int
    collective_ns: int
    phase_ns: dict[str, int]
    """By phase of TOTAL_PHASES."""
    group_ns: dict[tuple[int, int, int], int] = field(default_factory=dict)
    """Time in the collectives of each group the rank has a slot for, by (first, stride,
    size) of its members."""


@dataclass(frozen=True)
class LiveState:
    """One rank's state as read from its file; times in wall-clock seconds."""

    rank: int
    pid: int
    steps_done: int
    last_step_end_s: float | None
    phase: str
    phase_since_s: float | None
    op: str
    """The last collective entered ("" when none yet)."""
    group: str
    seq: int
    nbytes: int
    entered_s: float | None
    left_s: float | None
    """None while the rank is still in it."""
    last_done_s: float | None
    """When any of its collectives last completed."""
    flush_requests: int = 0
    flushes_answered: int = 0
    stage: str = ""
    """Start stage (STAGES); "" in a file written before the field existed."""
    stage_since_s: float | None = None
    totals: LiveTotals | None = None
    """None in a file written before they existed."""

    @property
    def in_collective(self) -> bool:
        return bool(self.op) and self.entered_s is not None and self.left_s is None

    @property
    def starting(self) -> bool:
        """Not through its start yet: no step done, at a start stage other than ``running``."""
        return bool(self.stage) and self.stage != "running" and self.steps_done == 0

    @property
    def completed(self) -> tuple[int, float] | None:
        """Its last collective's bytes and seconds from issue to completion, once it completed
        having moved bytes (what the metrics' per-op gauges show); None otherwise."""
        if self.left_s is None or self.entered_s is None or self.nbytes <= 0 or not self.op:
            return None
        seconds = self.left_s - self.entered_s
        return (self.nbytes, seconds) if seconds > 0 else None

    @property
    def last_progress_s(self) -> float | None:
        """The latest end of a step or of a collective (None before either)."""
        times = [t for t in (self.last_step_end_s, self.last_done_s) if t is not None]
        return max(times) if times else None


def parse_live_state(rank: int, raw: bytes) -> LiveState | None:
    """A state from the bytes of its file; None when they are not one (short, wrong magic)."""
    if len(raw) < OLD_SIZE:
        return None
    magic, pid, offset = HEADER.unpack_from(raw, HEADER_AT)
    if magic != MAGIC:
        return None

    def wall(ns: int) -> float | None:
        return None if ns <= 0 else (ns + offset) / 1e9

    steps, step_end = STEP.unpack_from(raw, STEP_AT)
    phase, since = PHASE.unpack_from(raw, PHASE_AT)
    op, group, seq, nbytes, entered, left = COLLECTIVE.unpack_from(raw, COLLECTIVE_AT)
    (done,) = DONE.unpack_from(raw, DONE_AT)
    made, answered = REQUEST.unpack_from(raw, REQUEST_AT)
    stage, stage_since = STAGE.unpack_from(raw, STAGE_AT)
    totals = None
    if len(raw) >= TOTALS_AT + TOTALS.size:
        step_ns, samples, collective_ns, *phases = TOTALS.unpack_from(raw, TOTALS_AT)
        phase_ns = dict(zip(TOTAL_PHASES, phases, strict=True))
        totals = LiveTotals(step_ns, samples, collective_ns, phase_ns, _group_ns(raw))
    return LiveState(
        rank=rank, pid=pid, steps_done=steps, last_step_end_s=wall(step_end),
        phase=field_text(phase), phase_since_s=wall(since), op=field_text(op),
        group=field_text(group),
        seq=seq, nbytes=nbytes, entered_s=wall(entered), left_s=wall(left),
        last_done_s=wall(done), flush_requests=made, flushes_answered=answered,
        stage=field_text(stage), stage_since_s=wall(stage_since), totals=totals,
    )  # fmt: skip


def _group_ns(raw: bytes) -> dict[tuple[int, int, int], int]:
    out = {}
    for i in range(GROUP_SLOTS if len(raw) >= SIZE else 0):
        first, stride, size, _, ns = GROUP_SLOT.unpack_from(raw, GROUPS_AT + GROUP_SLOT.size * i)
        if size > 1:
            out[(first, stride, size)] = ns
    return out


def read_live_state(run_dir: Path, rank: int) -> LiveState | None:
    try:
        raw = live_state_path(run_dir, rank).read_bytes()
    except OSError:
        return None
    return parse_live_state(rank, raw)


def read_live_states(run_dir: Path, world_size: int) -> dict[int, LiveState]:
    """The states of the ranks that have written one, by rank. The folder's name is made
    once (``top`` reads 1,024 of them every second); none when it does not exist."""
    folder = os.fspath(live_dir(run_dir))
    if not os.path.isdir(folder):
        return {}
    found = {}
    for rank in range(world_size):
        try:
            with open(os.path.join(folder, live_state_name(rank)), "rb") as f:
                raw = f.read()
        except OSError:
            continue
        state = parse_live_state(rank, raw)
        if state is not None:
            found[rank] = state
    return found


def request_flush(run_dir: Path, rank: int) -> bool:
    """Ask a live rank to write the events it holds; False when it has no state file."""
    path = live_state_path(run_dir, rank)
    try:
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), SIZE) as m:
            made, _ = REQUEST.unpack_from(m, REQUEST_AT)
            struct.pack_into("<q", m, REQUEST_AT, made + 1)
    except (OSError, ValueError):
        return False
    return True
