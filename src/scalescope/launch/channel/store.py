"""The ranks' live states over the network: for worlds another launcher started, and for
scalescope's own launch on several nodes.

Under srun or mpirun every task is one rank with its own scalescope process beside it
(launch/run/external.py); nodes may share no file system, and NFS would not show another node's
memory-mapped updates while they happen anyway. So each task's scalescope process relays its
rank's 256-byte live state (read from the local file, where the page cache makes it current)
into the job's own torch.distributed store, the TCPStore at MASTER_ADDR:MASTER_PORT that
every rank already reaches, under ``scalescope/`` keys. Task 0's scalescope process watches
the world there (launch/watch/hang.py's ``StoreSource``) and asks for flushes, stacks and
stops through requests the relays poll; a relay answers for its own rank, on its own node.

Whoever reaches the store's port can read and write these keys, so what acts on the job or
what the watcher believes is sealed with the user's key (launch/channel/seals.py):

- a request (flush, stacks, stop) is written to each relay on its own key, with an HMAC over
  that relay's session id (random, published when it connects: no two jobs nor relays share
  one, and nothing has to agree across nodes), the request and a count; a relay honours a
  count above the last it honoured, and ignores (and logs) anything else;
- a relay writes a rank's stacks only in answer to such a request, sealed, and the reader
  deletes them once read;
- a rank's live state is sealed with its rank; a reader ignores an unsealed one, and one older
  than the state of that rank it already has (a replay).

The world's size, the hosts, the ranks' ends and the slowdown alert are not sealed: they name
things, and no request follows from them.

The store dies with its owner (rank 0's scalescope process, launch/world/rendezvous.py), and a
client's request to a closed store prints a C++ trace (``Broken pipe``) in the job's output.
So the owner closes it politely (:func:`close_store`): it waits until every relay said how its
rank ended (its last request), then asks every relay to ``close`` (sealed, as the other
requests) and marks the store closing for ``top --connect``: a relay that is asked says it
left, and asks nothing more.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil

from scalescope.events.files import live_dir, live_state_path, stack_path
from scalescope.events.live_state import STACK_SIGNAL, LiveState, parse_live_state, request_flush
from scalescope.events.run import read_rank_meta
from scalescope.launch.channel.seals import seal, unseal
from scalescope.launch.process.stopping import stop_processes

PREFIX = "scalescope/"
RELAY_POLL_S = 0.25
CONNECT_S = 600.0
"""How long a relay waits for the store: rank 0's process may create it at its
``init_process_group``, after its imports."""
OP_TIMEOUT = timedelta(seconds=10)
FINISH_WAIT_S = 3.0
ENDS_WAIT_S = 10.0
"""How long the store's owner waits for the relays' last words before it closes the store: a
rank may end some seconds after rank 0 (its rank file, its interpreter's exit)."""
LEAVE_WAIT_S = 5.0
"""After the ``close`` request: how long the owner waits for the relays still polling to say
they left (a busy machine may not run one for a while)."""
FLUSH, STACKS, KILL, CLOSE = "flush", "stacks", "kill", "close"
REQUESTS = (FLUSH, STACKS, KILL, CLOSE)
MAX_LOGGED = 20
"""Ignored requests or states said at most this often (someone may write many)."""
DEFAULT_RDZV_PORT = 29400
"""torchrun's port of a ``--rdzv-endpoint`` given without one."""
STORE_OPTION = "live_store"
"""run.json's ``options`` key naming the store (HOST:PORT) where the live states are, so
``top RUN_DIR`` on another node reads them there."""


def connect(addr: str, port: int, timeout_s: float = CONNECT_S) -> Any:
    """A client of the job's TCPStore, waiting up to ``timeout_s`` for the server, in tries
    of OP_TIMEOUT: a client keeps its constructor's timeout to reconnect later, and a store
    that became unreachable must fail an operation in seconds, not minutes."""
    from torch.distributed import TCPStore

    deadline = time.monotonic() + timeout_s
    while True:
        if not wait_for_port(addr, port, deadline):
            raise RuntimeError(f"nothing listens at {addr}:{port}")
        try:
            return TCPStore(addr, port, is_master=False, timeout=OP_TIMEOUT, wait_for_workers=False)
        except RuntimeError:  # DistNetworkError, DistStoreError: not there (yet)
            if time.monotonic() >= deadline:
                raise


def wait_for_port(addr: str, port: int, deadline: float) -> bool:
    """Until something listens at ``addr:port`` (or the deadline): a plain socket, so no
    failed try of TCPStore's prints its warnings while rank 0 is still importing torch."""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((addr, port), timeout=1.0):
                return True
        except OSError:
            time.sleep(0.5)
    return False


def freshness(state: LiveState) -> float:
    """The latest moment a state speaks of (a newer state of the same rank says more)."""
    times = (state.last_progress_s, state.entered_s, state.left_s, state.phase_since_s)
    return max((t for t in times if t is not None), default=0.0)


def fresher_states(one: dict[int, LiveState], other: dict[int, LiveState]) -> dict[int, LiveState]:
    """Each rank's fresher state of the two readings (the store's and this node's files)."""
    merged = dict(one)
    for rank, state in other.items():
        if rank not in merged or freshness(state) > freshness(merged[rank]):
            merged[rank] = state
    return merged


NOT_SEALED = (
    "not sealed with this user's key (written by someone without it, or the nodes read "
    "different key files: ~/.scalescope/key or SCALESCOPE_KEY_FILE)"
)


def request_context(session: bytes, what: str) -> bytes:
    return b"ask:" + session + b":" + what.encode() + b":"


def split_address(text: str, default_port: int = DEFAULT_RDZV_PORT) -> tuple[str, int]:
    """``HOST:PORT`` (or ``HOST``, with ``default_port``)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        return text, default_port
    return host, int(port)


def say(text: str) -> None:
    print(f"scalescope: {text}", file=sys.stderr, flush=True)


class Channel:
    """The ``scalescope/`` keys of one job's store; connected at first use (which waits for
    the server) when given an address instead of a store. ``key`` seals and checks what acts
    (module docstring); ``warn`` says, once each, what was ignored for want of it."""

    def __init__(
        self,
        store: Any = None,
        addr: str = "",
        port: int = 0,
        *,
        key: bytes,
        warn: Callable[[str], None] | None = say,
    ) -> None:
        self._store, self.addr, self.port, self.key = store, addr, port, key
        self.warn = warn
        self.refused: set[str] = set()
        """What was ignored (each said once)."""
        self.unsealed: set[int] = set()
        """The ranks whose state at the last ``states`` was not sealed with ``key``."""
        self._accepted: dict[int, LiveState] = {}

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = connect(self.addr, self.port)
        return self._store

    def refuse(self, what: str, why: str, value: bytes = b"") -> None:
        """Say, once for each ``what`` and ``value``, that it was ignored and why."""
        seen = f"{what}:{hash(value)}"
        if seen in self.refused:
            return
        self.refused.add(seen)
        if self.warn is None or len(self.refused) > MAX_LOGGED + 1:
            return
        if len(self.refused) > MAX_LOGGED:
            self.warn(f"ignored {MAX_LOGGED} writes in the job's store; the next are not said")
        else:
            self.warn(f"ignored {what} in the job's store: {why}")

    @property
    def connected(self) -> bool:
        return self._store is not None

    def publish(self, rank: int, raw: bytes) -> None:
        self.store.set(f"{PREFIX}live/{rank}", seal(self.key, b"live:%d:" % rank, raw))

    def states(self, ranks: list[int]) -> dict[int, LiveState]:
        """The states of ``ranks`` that have published one, sealed (``_state``)."""
        keys = [f"{PREFIX}live/{r}" for r in ranks]
        present = self._present(list(zip(ranks, keys, strict=True)))
        self.unsealed = set()
        if not present:
            return {}
        values = self.store.multi_get([k for _, k in present])
        out = {}
        for (rank, _), value in zip(present, values, strict=True):
            state = self._state(rank, bytes(value))
            if state is not None:
                out[rank] = state
        return out

    def _present(self, pairs: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """The (index, key) pairs whose key exists: one round trip when all do."""
        if pairs and self.store.check([k for _, k in pairs]):
            return pairs
        return [(i, k) for i, k in pairs if self.store.check([k])]

    def _state(self, rank: int, value: bytes) -> LiveState | None:
        """The rank's state in ``value``; when that is not sealed, or older than the last
        one read (a replay), the last one read: what someone without the key writes can
        neither show a rank nor hide it."""
        last = self._accepted.get(rank)
        raw = unseal(self.key, b"live:%d:" % rank, value)
        if raw is None:
            self.unsealed.add(rank)
            self.refuse(f"rank {rank}'s live state", NOT_SEALED)
            return last
        state = parse_live_state(rank, raw)
        if state is None:
            return last
        if last is not None and freshness(state) < freshness(last):
            self.refuse(f"an older live state of rank {rank}", "a replay")
            return last
        self._accepted[rank] = state
        return state

    def register(self, session: str) -> int:
        """A relay's index, its session id published for the watcher to seal requests to."""
        index = int(self.store.add(f"{PREFIX}relays", 1)) - 1
        self.store.set(f"{PREFIX}relay/{index}", session.encode())
        return index

    def sessions(self) -> list[tuple[int, bytes]]:
        """Each registered relay's index and session id."""
        count = int(self.store.add(f"{PREFIX}relays", 0))
        present = self._present([(i, f"{PREFIX}relay/{i}") for i in range(count)])
        if not present:
            return []
        values = self.store.multi_get([k for _, k in present])
        return [(i, bytes(v)) for (i, _), v in zip(present, values, strict=True)]

    def ask(self, what: str) -> int:
        """Ask every relay for ``what`` (flush, stacks, kill), sealed to each one's session;
        the request's count, which also names the stacks that answer it."""
        count = int(self.store.add(f"{PREFIX}ask_count", 1))
        sessions = self.sessions()
        if sessions:
            keys = [f"{PREFIX}ask/{i}/{what}" for i, _ in sessions]
            values = [seal(self.key, request_context(s, what), b"%d" % count) for _, s in sessions]
            self.store.multi_set(keys, values)
        self.store.add(f"{PREFIX}asked", 1)
        return count

    def asked(self) -> int:
        """Raised after each request: a relay reads its requests only when it changed."""
        return int(self.store.add(f"{PREFIX}asked", 0))

    def request(self, index: int, what: str) -> bytes | None:
        """The sealed request for ``what`` on relay ``index``'s key, if any."""
        key = f"{PREFIX}ask/{index}/{what}"
        return bytes(self.store.get(key)) if self.store.check([key]) else None

    def put_stack(self, rank: int, count: int, text: str) -> None:
        context = b"stack:%d:%d:" % (rank, count)
        self.store.set(f"{PREFIX}stack/{rank}/{count}", seal(self.key, context, text.encode()))

    def stack(self, rank: int, count: int) -> str | None:
        """Rank ``rank``'s stacks in answer to request ``count``, deleted once read; None
        before the relay answered (or when what is there is not sealed)."""
        key = f"{PREFIX}stack/{rank}/{count}"
        if not self.store.check([key]):
            return None
        value = bytes(self.store.get(key))
        self.store.delete_key(key)
        text = unseal(self.key, b"stack:%d:%d:" % (rank, count), value)
        if text is None:
            self.refuse(f"rank {rank}'s stacks", NOT_SEALED)
            return None
        return text.decode("utf-8", "replace")

    def put_world(self, world_size: int) -> None:
        self.store.set(f"{PREFIX}world", str(world_size).encode())

    def world_size(self) -> int:
        """The world's size as the relays said it; 0 before any did."""
        key = f"{PREFIX}world"
        return int(bytes(self.store.get(key)).decode()) if self.store.check([key]) else 0

    def put_host(self, rank: int, host: str) -> None:
        self.store.set(f"{PREFIX}host/{rank}", host.encode())

    def host(self, rank: int) -> str:
        key = f"{PREFIX}host/{rank}"
        return bytes(self.store.get(key)).decode() if self.store.check([key]) else ""

    def put_alert(self, message: str) -> None:
        """The slowdown watch's latest alert, for ``top --connect``."""
        self.store.set(f"{PREFIX}alert", message.encode())

    def alert(self) -> str | None:
        key = f"{PREFIX}alert"
        return bytes(self.store.get(key)).decode() if self.store.check([key]) else None

    def put_ended(self, rank: int, status: str) -> None:
        self.store.set(f"{PREFIX}ended/{rank}", status.encode())
        self.store.add(f"{PREFIX}ended_count", 1)

    def ended_count(self) -> int:
        return int(self.store.add(f"{PREFIX}ended_count", 0))

    def mark_closing(self) -> None:
        self.store.set(f"{PREFIX}closing", b"1")

    def closing(self) -> bool:
        """The store's owner is about to close it (for readers: ``top --connect``; a relay
        leaves on the sealed ``close`` request instead)."""
        return bool(self.store.check([f"{PREFIX}closing"]))

    def leave(self, ranks: int) -> None:
        """A relay of ``ranks`` ranks, asked to ``close``, says it asks nothing more."""
        self.store.add(f"{PREFIX}left", ranks)

    def left_count(self) -> int:
        return int(self.store.add(f"{PREFIX}left", 0))

    def ended(self, rank: int) -> str:
        key = f"{PREFIX}ended/{rank}"
        return bytes(self.store.get(key)).decode() if self.store.check([key]) else ""


def close_store(
    channel: Channel, ranks: int, wait_s: float = ENDS_WAIT_S, leave_s: float = LEAVE_WAIT_S
) -> int:
    """What the store's owner does before it closes the store: wait (at most ``wait_s``) until
    the relays said how each of ``ranks`` ranks ended, then ask them to ``close``; wait (at
    most ``leave_s``) until the relays whose ranks run on said they left, and one poll more
    for a ``top --connect`` frame under way. The number of ranks whose end was heard."""
    heard = 0
    with contextlib.suppress(Exception):  # a store that already failed: nothing to protect
        deadline = time.monotonic() + wait_s
        while (heard := channel.ended_count()) < ranks and time.monotonic() < deadline:
            time.sleep(0.05)
        channel.mark_closing()
        channel.ask(CLOSE)
        deadline = time.monotonic() + leave_s
        while heard < ranks and time.monotonic() < deadline:
            time.sleep(0.05)
            if channel.left_count() + (heard := channel.ended_count()) >= ranks:
                break
        time.sleep(RELAY_POLL_S)
    return heard


class Relay(threading.Thread):
    """Beside the ranks of this node: their states to the store, and the watcher's requests
    to them (a flush through the state file, SIGUSR2 for the stacks, a stop), each honoured
    only when sealed with ``key`` for this relay's session and not seen before. ``ranks``
    says which ranks run here, by pid; it is asked again at every poll (ranks start late)."""

    def __init__(
        self,
        addr: str,
        port: int,
        run_dir: Path,
        ranks: Callable[[], dict[int, int]],
        world_size: int = 0,
        *,
        key: bytes,
    ) -> None:
        super().__init__(daemon=True, name="scalescope-live-relay")
        self.addr, self.port, self.world, self.key = addr, port, world_size, key
        self.run_dir, self.ranks = Path(run_dir), ranks
        self.done = threading.Event()
        self.channel: Channel | None = None
        self.session = secrets.token_hex(16).encode()
        self.index = -1
        self.closed = False
        """The store's owner asked to close: no request may follow but the leave."""
        self._honoured = dict.fromkeys(REQUESTS, 0)
        self._asked = 0
        self._last: dict[int, bytes] = {}
        self._pids: dict[int, int] = {}

    def run(self) -> None:
        with contextlib.suppress(Exception):  # no store (it ended with rank 0): nothing to relay
            self.channel = Channel(addr=self.addr, port=self.port, key=self.key)
            self.index = self.channel.register(self.session.decode())
            if self.world:
                self.channel.put_world(self.world)
            while not self.done.wait(RELAY_POLL_S):
                self._publish(self.channel)
                self._answer(self.channel)
                if self.closed:
                    return

    def _publish(self, channel: Channel) -> None:
        for rank, pid in self.ranks().items():
            if rank not in self._pids:
                channel.put_host(rank, socket.gethostname())
            self._pids[rank] = pid
        for rank in self._pids:
            raw = self._read(rank)
            if raw and raw != self._last.get(rank):
                channel.publish(rank, raw)
                self._last[rank] = raw

    def _read(self, rank: int) -> bytes:
        try:
            return live_state_path(self.run_dir, rank).read_bytes()
        except OSError:
            return b""

    def _answer(self, channel: Channel) -> None:
        asked = channel.asked()
        if asked == self._asked:
            return
        self._asked = asked
        if self._honour(channel, CLOSE) is not None:
            self._leave(channel)
            return
        for what in (FLUSH, STACKS, KILL):
            count = self._honour(channel, what)
            if count is None:
                continue
            for rank, pid in self._pids.items():
                if what == FLUSH:
                    request_flush(self.run_dir, rank)
                elif what == STACKS:
                    text = self._stacks(rank, pid)
                    if not channel.closing():  # seconds may have passed
                        channel.put_stack(rank, count, text)
            if what == KILL:
                alive = []
                for pid in self._pids.values():
                    with contextlib.suppress(psutil.Error):
                        alive.append(psutil.Process(pid))
                stop_processes(alive)

    def _honour(self, channel: Channel, what: str) -> int | None:
        count = self.verified(channel, what)
        if count is not None:
            self._honoured[what] = count
        return count

    def _leave(self, channel: Channel) -> None:
        self.closed = True
        channel.leave(max(len(self._pids), len(self.ranks()), 1))

    def verified(self, channel: Channel, what: str) -> int | None:
        """The count of a new request for ``what`` sealed for this relay's session; None
        when there is none, and (said once each) when it is not sealed or is a replay."""
        value = channel.request(self.index, what)
        if value is None:
            return None
        payload = unseal(self.key, request_context(self.session, what), value)
        count = int(payload) if payload is not None and payload.isdigit() else None
        honoured = self._honoured[what]
        if count is not None and count > honoured:
            return count
        if count is None:
            channel.refuse(f"a {what} request", NOT_SEALED, value)
        elif count < honoured:
            channel.refuse(f"a {what} request of count {count}", f"a replay ({honoured} done)")
        return None

    def _stacks(self, rank: int, pid: int, wait_s: float = 3.0) -> str:
        """A rank's Python stacks, written by its faulthandler on STACK_SIGNAL."""
        path = stack_path(self.run_dir, rank)
        size = path.stat().st_size if path.exists() else 0
        with contextlib.suppress(OSError):
            os.kill(pid, STACK_SIGNAL)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if path.exists() and path.stat().st_size > size:
                time.sleep(0.05)
                with open(path, "rb") as f:
                    f.seek(size)
                    return f.read().decode("utf-8", "replace")
        return ""

    def statuses(self) -> dict[int, str]:
        """How each rank of this node ended, as its rank file says."""
        out = {}
        for rank in sorted(self._pids):
            meta = read_rank_meta(self.run_dir, rank)
            out[rank] = meta.status if meta is not None else "unknown"
        return out

    def finish(self, wait_s: float = FINISH_WAIT_S) -> None:
        """The ranks ended: their last states and statuses, then stop. At most ``wait_s``:
        a store that can no longer be reached must not hold the launcher."""
        self.done.set()
        self.join(timeout=wait_s)
        if self.channel is None or not self.channel.connected or self.closed or self.is_alive():
            return
        channel = self.channel

        def last_words() -> None:
            with contextlib.suppress(Exception):
                if self._honour(channel, CLOSE) is not None:
                    self._leave(channel)
                    return
                self._publish(channel)
                for rank, status in self.statuses().items():
                    channel.put_ended(rank, status)

        words = threading.Thread(target=last_words, daemon=True, name="scalescope-relay-end")
        words.start()
        words.join(timeout=wait_s)


def node_ranks(run_dir: Path) -> dict[int, int]:
    """The ranks of this node's launcher, by pid: live state files whose process descends
    from this one (a run directory other nodes share holds their ranks too, and a pid of
    theirs may exist here as another process, or as theirs where the "nodes" share a pid
    namespace)."""
    out = {}
    for path in live_dir(run_dir).glob("rank-*.state"):
        try:
            rank = int(path.stem.removeprefix("rank-"))
            state = parse_live_state(rank, path.read_bytes())
        except (OSError, ValueError):
            continue
        if state is not None and _descends(state.pid):
            out[rank] = state.pid
    return out


_DESCENDS: dict[int, bool] = {}
"""Whether a pid descends from this process, as first found (a pid is asked at every poll)."""


def _descends(pid: int) -> bool:
    found = _DESCENDS.get(pid)
    if found is None:
        try:
            found = any(p.pid == os.getpid() for p in psutil.Process(pid).parents())
        except psutil.Error:
            return False
        _DESCENDS[pid] = found
    return found and psutil.pid_exists(pid)
