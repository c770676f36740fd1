"""The ranks' live states over the network, for worlds another launcher started.

Under srun or mpirun every task is one rank with its own scalescope process beside it
(launch/external.py); nodes may share no file system, and NFS would not show another node's
memory-mapped updates while they happen anyway. So each task's scalescope process relays its
rank's 256-byte live state (read from the local file, where the page cache makes it current)
into the job's own torch.distributed store, the TCPStore at MASTER_ADDR:MASTER_PORT that
every rank already reaches, under ``scalescope/`` keys. Task 0's scalescope process watches
the world there (launch/hang_watch.py's ``StoreSource``) and asks for flushes, stacks and
stops through counters the relays poll; a relay answers for its own rank, on its own node.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil

from scalescope.events.files import live_state_path, stack_path
from scalescope.events.live_state import STACK_SIGNAL, LiveState, parse_live_state, request_flush

PREFIX = "scalescope/"
RELAY_POLL_S = 0.25
CONNECT_S = 600.0
"""How long a relay waits for the store: rank 0's process may create it at its
``init_process_group``, after its imports."""
OP_TIMEOUT = timedelta(seconds=10)
FLUSH, STACKS, KILL = "flush", "stacks", "kill"


def connect(addr: str, port: int, timeout_s: float = CONNECT_S) -> Any:
    """A client of the job's TCPStore (it waits up to ``timeout_s`` for the server)."""
    from torch.distributed import TCPStore

    store = TCPStore(
        addr, port, is_master=False, timeout=timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )  # fmt: skip
    store.set_timeout(OP_TIMEOUT)
    return store


class Channel:
    """The ``scalescope/`` keys of one job's store; connected at first use (which waits for
    the server) when given an address instead of a store."""

    def __init__(self, store: Any = None, addr: str = "", port: int = 0) -> None:
        self._store, self.addr, self.port = store, addr, port

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = connect(self.addr, self.port)
        return self._store

    def publish(self, rank: int, raw: bytes) -> None:
        self.store.set(f"{PREFIX}live/{rank}", raw)

    def states(self, ranks: list[int]) -> dict[int, LiveState]:
        """The states of ``ranks`` that have published one."""
        keys = [f"{PREFIX}live/{r}" for r in ranks]
        present = [(r, k) for r, k in zip(ranks, keys, strict=True) if self.store.check([k])]
        if not present:
            return {}
        values = self.store.multi_get([k for _, k in present])
        out = {}
        for (rank, _), raw in zip(present, values, strict=True):
            state = parse_live_state(rank, bytes(raw))
            if state is not None:
                out[rank] = state
        return out

    def ask(self, what: str) -> int:
        """Raise the counter of a request (flush, stacks, kill); the new count."""
        return int(self.store.add(f"{PREFIX}ask/{what}", 1))

    def asked(self, what: str) -> int:
        return int(self.store.add(f"{PREFIX}ask/{what}", 0))

    def put_stack(self, rank: int, count: int, text: str) -> None:
        self.store.set(f"{PREFIX}stack/{rank}/{count}", text.encode())

    def stack(self, rank: int, count: int) -> str | None:
        key = f"{PREFIX}stack/{rank}/{count}"
        if not self.store.check([key]):
            return None
        return bytes(self.store.get(key)).decode("utf-8", "replace")

    def put_ended(self, rank: int, status: str) -> None:
        self.store.set(f"{PREFIX}ended/{rank}", status.encode())

    def ended(self, rank: int) -> str:
        key = f"{PREFIX}ended/{rank}"
        return bytes(self.store.get(key)).decode() if self.store.check([key]) else ""


class Relay(threading.Thread):
    """In each task's scalescope process: its rank's state to the store, and the watcher's
    requests to its rank (a flush through the state file, SIGUSR2 for the stacks, a stop)."""

    def __init__(self, addr: str, port: int, run_dir: Path, rank: int, pid: int) -> None:
        super().__init__(daemon=True, name="scalescope-live-relay")
        self.addr, self.port = addr, port
        self.run_dir, self.rank, self.pid = Path(run_dir), rank, pid
        self.done = threading.Event()
        self.channel: Channel | None = None
        self._seen = {FLUSH: 0, STACKS: 0, KILL: 0}

    def run(self) -> None:
        with contextlib.suppress(Exception):  # no store (it ended with rank 0): nothing to relay
            self.channel = Channel(addr=self.addr, port=self.port)
            self._seen = {what: self.channel.asked(what) for what in self._seen}
            last = b""
            while not self.done.wait(RELAY_POLL_S):
                raw = self._read()
                if raw and raw != last:
                    self.channel.publish(self.rank, raw)
                    last = raw
                self._answer(self.channel)

    def _read(self) -> bytes:
        try:
            return live_state_path(self.run_dir, self.rank).read_bytes()
        except OSError:
            return b""

    def _answer(self, channel: Channel) -> None:
        for what in (FLUSH, STACKS, KILL):
            count = channel.asked(what)
            if count <= self._seen[what]:
                continue
            self._seen[what] = count
            if what == FLUSH:
                request_flush(self.run_dir, self.rank)
            elif what == STACKS:
                channel.put_stack(self.rank, count, self._stacks())
            else:
                from scalescope.launch.hang_watch import stop_processes

                with contextlib.suppress(psutil.Error):
                    stop_processes([psutil.Process(self.pid)])

    def _stacks(self, wait_s: float = 3.0) -> str:
        """The rank's Python stacks, written by its faulthandler on STACK_SIGNAL."""
        path = stack_path(self.run_dir, self.rank)
        size = path.stat().st_size if path.exists() else 0
        with contextlib.suppress(OSError):
            os.kill(self.pid, STACK_SIGNAL)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if path.exists() and path.stat().st_size > size:
                time.sleep(0.05)
                with open(path, "rb") as f:
                    f.seek(size)
                    return f.read().decode("utf-8", "replace")
        return ""

    def finish(self, status: str) -> None:
        """The rank ended: its last state and its status, then stop."""
        self.done.set()
        self.join(timeout=2.0)
        if self.channel is not None:
            with contextlib.suppress(Exception):
                raw = self._read()
                if raw:
                    self.channel.publish(self.rank, raw)
                self.channel.put_ended(self.rank, status)
