"""Where the hang watch (launch/watch/hang.py) reads the ranks' live states and sends its
requests: this node's state files and processes (``FileSource``), or every rank through the
job's store, its relays answering on their nodes (``StoreSource``).

A poll (``read``) of the store reads the nodes' records (launch/channel/node_record.py) and
only the states of the ranks no record covers (an older relay, a record that did not open):
at 16,384 ranks 1,024 records rather than 16,384 states. Every rank's state is read when the
watch asks for it (the records say the job may have hung, the slowdown watch's turn, the
metrics per rank) and where no relay publishes records (docs/many-ranks.md)."""

from __future__ import annotations

import socket
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from scalescope.analyze.watch.ring_calls import RingCall, decode_calls
from scalescope.events.files import stack_path
from scalescope.events.live_state import (
    STACK_SIGNAL,
    LiveState,
    read_live_states,
    request_flush,
)
from scalescope.events.run import read_rank_meta
from scalescope.launch.channel.node_record import NodesRead, current
from scalescope.launch.channel.store import (
    CALLS,
    FLUSH,
    KILL,
    RELAY_POLL_S,
    STACKS,
    Channel,
    fresher_states,
)
from scalescope.launch.process.stopping import stop_processes

ANSWER_WAIT_S = 3.0


@dataclass(frozen=True)
class WatchRead:
    """One poll: the states read, the nodes' records, and whether ``states`` holds every
    rank that has one (else the ranks the records cover are not in it)."""

    states: dict[int, LiveState]
    nodes: NodesRead = field(default_factory=NodesRead)
    whole: bool = True


class FileSource:
    """The ranks of this node's launcher: their live state files, their processes."""

    def __init__(self, run_dir: Path, world_size: int) -> None:
        self.run_dir, self.world_size = run_dir, world_size
        self._local: dict[int, psutil.Process | None] = {}

    def states(self) -> dict[int, LiveState]:
        return read_live_states(self.run_dir, self.world_size)

    def read(self, whole: bool = False) -> WatchRead:
        """Every rank's file: there are no records here."""
        return WatchRead(self.states())

    def unknown(self) -> set[int]:
        """None: this user's files are not sealed, and need not be."""
        return set()

    def flush(self, states: dict[int, LiveState], wait_s: float = ANSWER_WAIT_S) -> set[int]:
        """Ask those of ``states``' ranks whose files this node has (and whose process runs
        here) to flush; the ranks asked that did not answer within ``wait_s``."""
        mine = self.states()
        self._local = local_pids(self.run_dir, mine)
        asked = {
            r: s.flush_requests + 1
            for r, s in mine.items()
            if r in states and self._local.get(r) is not None
        }
        for rank in asked:
            request_flush(self.run_dir, rank)
        deadline = time.monotonic() + wait_s
        while asked and time.monotonic() < deadline:
            now = read_live_states(self.run_dir, self.world_size)
            asked = {r: n for r, n in asked.items() if r in now and now[r].flushes_answered < n}
            time.sleep(0.05)
        return set(asked)

    def stacks(self) -> dict[int, str]:
        return collect_stacks(self.run_dir, self._local)

    def last_calls(self, rank: int) -> tuple[tuple[RingCall, ...], str]:
        """None beyond this node's files (the hang watch reads the rings here itself)."""
        return (), ""

    def ended(self, rank: int, state: LiveState) -> str:
        meta = read_rank_meta(self.run_dir, rank)
        if meta is not None and meta.status != "running":
            return meta.status
        if rank not in self._local:  # not this node's rank: its file is not here
            return ""
        gone = self._local.get(rank) is None
        if gone and (meta is None or meta.hostname == socket.gethostname()):
            return "process gone"
        return ""

    def stop(self) -> None:
        stop_processes([p for p in self._local.values() if p is not None])

    def host(self, rank: int) -> str:
        meta = read_rank_meta(self.run_dir, rank)
        return meta.hostname if meta is not None and meta.hostname else ""


class StoreSource:
    """Every rank, through the job's store (launch/channel/store.py): the relays beside the
    ranks answer on their nodes. The state files this node can read are used too, whichever
    of the two is fresher: its own ranks' files are current when the store is not reachable,
    and a run directory another node shares may show a state its relay never sent."""

    def __init__(self, channel: Channel, world_size: int, files: FileSource | None = None) -> None:
        self.channel, self.world_size, self.files = channel, world_size, files
        self._calls: dict[int, tuple[tuple[RingCall, ...], str]] = {}

    def states(self) -> dict[int, LiveState]:
        stored = self.channel.states(list(range(self.world_size)))
        return fresher_states(stored, self.files.states() if self.files else {})

    def read(self, whole: bool = False) -> WatchRead:
        """The nodes' records and the states of the ranks none covers; every rank's state
        with ``whole``, or where no relay publishes a record."""
        nodes = self.nodes()
        if whole or not (nodes.records or nodes.unknown):
            return WatchRead(self.states(), nodes)
        covered = {r for record in nodes.records for r in record.ranks}
        rest = [r for r in range(self.world_size) if r not in covered]
        stored = self.channel.states(rest) if rest else {}
        here = self.files.states() if self.files else {}
        states = fresher_states(stored, {r: s for r, s in here.items() if r not in covered})
        return WatchRead(states, nodes, whole=not covered)

    def nodes(self) -> NodesRead:
        """The nodes' records the relays published (launch/channel/node_record.py)."""
        records = current(self.channel.node_records())
        return NodesRead(tuple(records.values()), tuple(sorted(self.channel.unknown_nodes)))

    def unknown(self) -> set[int]:
        """The ranks whose state in the store did not open with the job's seal at the last
        ``states``, and that no file here shows either."""
        here = self.files.states() if self.files else {}
        return {r for r in self.channel.unknown if r not in here}

    def flush(self, states: dict[int, LiveState], wait_s: float = ANSWER_WAIT_S) -> set[int]:
        """The relays of ``states``' ranks asked, sealed, to have their ranks flush (every
        relay where a rank is on no node record); the ranks of ``states`` that did not answer
        within ``wait_s`` (and the relays' poll)."""
        if self.files is not None:
            self.files.flush(states, wait_s)
        want = {r: s.flush_requests + 1 for r, s in states.items() if not self.ended(r, s)}
        self.channel.ask(FLUSH, self._relays_of(set(want)))
        deadline = time.monotonic() + wait_s + RELAY_POLL_S * 2
        while want and time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.channel.states(list(want))
            want = {r: n for r, n in want.items() if r in now and now[r].flushes_answered < n}
        return set(want)

    def _relays_of(self, ranks: set[int]) -> set[int] | None:
        """The relays whose node records hold ``ranks``; None (every relay) when a rank is
        on none: at 16,384 ranks an alert's few ranks flush their nodes, not every ring."""
        records = current(self.channel.node_records())
        relays = {i for i, record in records.items() if not ranks.isdisjoint(record.ranks)}
        held = {r for i in relays for r in records[i].ranks}
        return relays if ranks <= held else None

    def stacks(self) -> dict[int, str]:
        found = self.files.stacks() if self.files else {}
        count = self.channel.ask(STACKS)
        deadline = time.monotonic() + ANSWER_WAIT_S + RELAY_POLL_S * 4
        asked = [r for r in range(self.world_size) if r not in found]
        calls = list(range(self.world_size))
        while asked and time.monotonic() < deadline:
            time.sleep(0.1)
            for rank in list(asked):
                if (text := self.channel.stack(rank, count)) is not None:
                    asked.remove(rank)
                    if text:
                        found[rank] = text
            calls = self._take_calls(calls, count)
        coming = [r for r in calls if r not in asked]  # sent right after their stacks
        while coming and time.monotonic() < deadline:
            coming = self._take_calls(coming, count)
            time.sleep(0.02)
        return found

    def _take_calls(self, ranks: list[int], count: int) -> list[int]:
        """The last calls the relays sent beside the stacks of request ``count``; the ranks
        still without."""
        left = []
        for rank in ranks:
            raw = self.channel.answer(CALLS, rank, count)
            if raw is None:
                left.append(rank)
            else:
                self._calls[rank] = decode_calls(raw)
        return left

    def last_calls(self, rank: int) -> tuple[tuple[RingCall, ...], str]:
        """The rank's last calls as its node's relay read them at the last ``stacks``."""
        return self._calls.get(rank, ((), ""))

    def ended(self, rank: int, state: LiveState) -> str:
        said = self.channel.ended(rank)
        if said or self.files is None:
            return said
        return self.files.ended(rank, state)

    def stop(self) -> None:
        if self.files is not None:
            self.files.stop()
        self.channel.ask(KILL)

    def host(self, rank: int) -> str:
        return self.channel.host(rank) or (self.files.host(rank) if self.files else "")


def local_pids(run_dir: Path, states: dict[int, LiveState]) -> dict[int, psutil.Process | None]:
    """Each rank's process when it runs on this node and still lives, else None."""
    host = socket.gethostname()
    out: dict[int, psutil.Process | None] = {}
    for rank, state in states.items():
        meta = read_rank_meta(run_dir, rank)
        proc = None
        if meta is None or meta.hostname == host:
            with suppress(psutil.Error):
                candidate = psutil.Process(state.pid)
                if candidate.status() != psutil.STATUS_ZOMBIE:
                    proc = candidate
        out[rank] = proc
    return out


def collect_stacks(run_dir: Path, procs: dict[int, psutil.Process | None]) -> dict[int, str]:
    """Each live local rank's Python stacks, written by its faulthandler on STACK_SIGNAL."""
    sizes: dict[int, int] = {}
    for rank, proc in procs.items():
        if proc is None:
            continue
        path = stack_path(run_dir, rank)
        sizes[rank] = path.stat().st_size if path.exists() else 0
        with suppress(psutil.Error):
            proc.send_signal(STACK_SIGNAL)
    deadline = time.monotonic() + ANSWER_WAIT_S
    stacks: dict[int, str] = {}
    while sizes and time.monotonic() < deadline:
        time.sleep(0.1)
        for rank, size in list(sizes.items()):
            path = stack_path(run_dir, rank)
            if path.exists() and path.stat().st_size > size:
                time.sleep(0.05)
                with open(path, "rb") as f:
                    f.seek(size)
                    stacks[rank] = f.read().decode("utf-8", "replace")
                del sizes[rank]
    return stacks
