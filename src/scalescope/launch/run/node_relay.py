"""One relay per node under srun and mpirun, where each rank has its own scalescope task.

A relay polls the job's store four times a second (launch/channel/relay.py): one per task
would put 16,384 pollers on one store at 16,384 ranks. So the task of local rank 0 relays
every rank of its node, reading its siblings' live-state files as a node's relay does under
scalescope's own ``--nnodes`` launch, and the other tasks relay nothing.

Which files are this node's: a task's rank carries the node's token in ``NODE_ENV``
(:func:`node_token`: the host and the job's store), read back from ``/proc/PID/environ``; a
run directory shared with other nodes holds their files too, whose pids may name another
process here.

A sibling's end reaches the store through the node's relay: it keeps relaying after its own
rank ended, until each sibling's rank file says how it ended (or its process is gone and its
task had ``END_FILE_GRACE_S`` to write it), then sends their last states and statuses. It
waits at most ``SIBLINGS_WAIT_S`` (the store's owner waits as long for every rank's end,
launch/channel/closing.py): a sibling that runs on (stuck in a collective its crashed rank
never joins) is relayed on by a sibling's task, as below.

The relaying task holds a lock on a file in this node's temporary folder for as long as it
lives. If it dies (killed, out of memory), the kernel drops the lock and the next sibling
task that polls it (every ``TAKEOVER_CHECK_S``, a local system call, not the store) relays
the node from then on, so that the other ranks' states and ends still reach the store. A
relay that ends before all of its node's ranks did leaves the lock's file in place, so
that a sibling whose rank runs on takes over the same way (not once the store's owner asked
the relays to close: the store is about to go).

The relaying task also writes the node's node files (launch/run/node_files.py), window by
window; a sibling that takes over starts them again from the ranks' files' beginning.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from scalescope.events.run import read_rank_meta
from scalescope.launch.channel.relay import Relay, live_ranks
from scalescope.launch.run.node_files import NodeFilesThread
from scalescope.launch.world.variables import World

NODE_ENV = "SCALESCOPE_NODE_RELAY"
"""In each rank's environment: the token of the node whose relay relays it."""
TAKEOVER_CHECK_S = 1.0
SIBLINGS_WAIT_S = 10.0
END_FILE_GRACE_S = 2.0
"""After a sibling's process is gone: how long its task gets to write its end (a rank
killed after its stop signal's grace, launch/run/external.py ``end_stopped_rank``)."""


def node_token(world: World) -> str:
    """The same on every task of one node of one job, different on another node."""
    text = f"{socket.gethostname()}|{world.master_addr}|{world.master_port}|{world.job_id}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def lock_path(token: str) -> Path:
    return Path(tempfile.gettempdir()) / f"scalescope-{os.getuid()}" / f"relay-{token}.lock"


def sibling_ranks(run_dir: Path, token: str) -> dict[int, int]:
    """The ranks of this node, by pid: live-state files whose process carries ``token``."""
    return live_ranks(run_dir, lambda pid: _token_of(pid) == token)


_TOKENS: dict[int, str | None] = {}
"""A pid's token as first read (a pid is asked at every poll)."""


def _token_of(pid: int) -> str | None:
    if pid not in _TOKENS:
        try:
            _TOKENS[pid] = psutil.Process(pid).environ().get(NODE_ENV)
        except psutil.Error:
            return None
    return _TOKENS[pid] if psutil.pid_exists(pid) else None


def claim(path: Path) -> int | None:
    """Local rank 0's lock, in place before the path appears: a sibling that finds the file
    finds it locked while this task lives. The open descriptor; None when it cannot be had."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fresh = path.with_name(f"{path.name}.{os.getpid()}")
        fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(fresh, path)
        return fd
    return None


def take(path: Path) -> int | None:
    """The lock of a relay that died; None while it lives (or before it was claimed)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class NodeRelay:
    """This task's part in relaying its node of ``ranks`` ranks: the relay itself (local
    rank 0, or a sibling whose relay died), or a standby that polls the relay's lock.
    ``make`` builds the relay for a callable of the node's ranks; ``own``: this task's rank
    and its pid, relayed even where the siblings' environments cannot be read (hidepid)."""

    def __init__(
        self,
        run_dir: Path,
        token: str,
        ranks: int,
        make: Callable[[Callable[[], dict[int, int]]], Relay],
        own: dict[int, int] | None = None,
        files: Callable[[Callable[[], list[int]]], NodeFilesThread] | None = None,
    ) -> None:
        self.run_dir, self.token, self.ranks, self.make = Path(run_dir), token, ranks, make
        self.own = own or {}
        self.make_files = files
        """Starts the node's files (run/node_files.py) for a callable of the node's ranks."""
        self.files: NodeFilesThread | None = None
        self.path = lock_path(token)
        self.relay: Relay | None = None
        self._found: dict[int, int] = {}
        self._fd: int | None = None
        self._done = threading.Event()
        self._standby: threading.Thread | None = None

    def start(self, local_rank: int) -> None:
        if local_rank == 0:
            self._fd = claim(self.path)
            self._relay()
            return
        self._standby = threading.Thread(
            target=self._stand_by, daemon=True, name="scalescope-relay-standby"
        )
        self._standby.start()

    def _relay(self) -> None:
        self.relay = self.make(self.node_ranks)
        self.relay.start()
        if self.make_files is not None:
            self.files = self.make_files(lambda: sorted(self.node_ranks()))

    def node_ranks(self) -> dict[int, int]:
        """The node's ranks, by pid; the run directory is no longer read once all were
        found (a directory shared by thousands of ranks would be read four times a second)."""
        if len(self._found) < self.ranks:
            self._found = self.own | sibling_ranks(self.run_dir, self.token)
        return self._found

    def _stand_by(self) -> None:
        while not self._done.wait(TAKEOVER_CHECK_S):
            fd = take(self.path)
            if fd is not None:
                self._fd = fd
                print(
                    "scalescope: the task relaying this node's ranks ended before them; "
                    "this task relays them now",
                    file=sys.stderr,
                    flush=True,
                )
                self._relay()
                return

    def end(self, wait_s: float = SIBLINGS_WAIT_S) -> Relay | None:
        """This task's rank ended: a relay sends its siblings' ends once they ended (at most
        ``wait_s``); a standby stops. The relay, finished; None on a standby."""
        self._done.set()
        if self._standby is not None:
            self._standby.join()
        relay, ended = self.relay, False
        if relay is not None:
            ended = wait_for_siblings(relay, self.run_dir, wait_s)
            if self.files is not None:  # before the last words: node 0 merges after them
                self.files.finish()
            relay.finish()
        if self._fd is not None:
            if relay is not None and (relay.closed or (ended and len(relay.pids()) >= self.ranks)):
                with contextlib.suppress(OSError):
                    self.path.unlink()
            os.close(self._fd)
            self._fd = None
        return relay


def wait_for_siblings(relay: Relay, run_dir: Path, wait_s: float, poll_s: float = 0.1) -> bool:
    """Until every rank the relay relays has its end in its rank file, or its process is gone
    and its task had END_FILE_GRACE_S; the relay relays on meanwhile (the hang watch reads
    them). Not past ``wait_s``, nor the relay's own end (the store's owner asked it to close).
    Whether every rank ended."""
    gone_at: dict[int, float] = {}
    deadline = time.monotonic() + wait_s
    while relay.is_alive() and time.monotonic() < deadline:
        if not any(_running(run_dir, r, pid, gone_at) for r, pid in relay.pids().items()):
            return True
        time.sleep(poll_s)
    return False


def _running(run_dir: Path, rank: int, pid: int, gone_at: dict[int, float]) -> bool:
    """No end in its rank file yet, and its process alive or gone less than
    END_FILE_GRACE_S ago (``gone_at``: when it was first found gone)."""
    meta = read_rank_meta(run_dir, rank)
    if meta is not None and meta.status != "running":
        return False
    if _alive(pid):
        return True
    return time.monotonic() - gone_at.setdefault(rank, time.monotonic()) < END_FILE_GRACE_S


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
