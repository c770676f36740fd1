"""Beside the ranks of one node: their live states relayed into the job's store, and the
watcher's requests back to them (a flush through the state file, SIGUSR2 for the stacks, a
stop), each honoured only when sealed for this relay's session (launch/channel/store.py says
what travels there and why it is sealed). Every seal covers the job's id: the relay of the end
that owns the job's channel is given it and publishes it; the others learn it from the store.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from scalescope.analyze.watch.ring_calls import encode_calls, read_last_calls
from scalescope.events.files import live_dir, live_state_path, stack_path
from scalescope.events.live_state import (
    STACK_SIGNAL,
    LiveState,
    parse_live_state,
    request_flush,
)
from scalescope.events.run import read_rank_meta
from scalescope.launch.channel.node_record import node_record
from scalescope.launch.channel.seals import NOT_SEALED, request_name
from scalescope.launch.channel.store import (
    CALLS,
    CLOSE,
    FLUSH,
    KILL,
    RELAY_POLL_S,
    REQUESTS,
    STACKS,
    Channel,
)
from scalescope.launch.process.stopping import stop_processes

FINISH_WAIT_S = 3.0
JOB_CHECK_S = 5.0
"""How often a relay reads the job's id again: the owner's puts its own back when another
was written there, a relay that learnt another one follows."""


class Relay(threading.Thread):
    """Beside the ranks of this node: their states to the store, and the watcher's requests
    to them (a flush through the state file, SIGUSR2 for the stacks, a stop), each honoured
    only when sealed with ``key`` for this job and this relay's session and not seen before.
    ``ranks`` says which ranks run here, by pid; it is asked again at every poll (ranks start
    late). ``job``: the job's id, given to the owner of the job's channel, which publishes it;
    the other relays learn it from the store before they publish anything."""

    def __init__(
        self,
        addr: str,
        port: int,
        run_dir: Path,
        ranks: Callable[[], dict[int, int]],
        world_size: int = 0,
        *,
        key: bytes,
        job: bytes = b"",
    ) -> None:
        super().__init__(daemon=True, name="scalescope-live-relay")
        self.addr, self.port, self.world, self.key = addr, port, world_size, key
        self.job, self.owner = job, bool(job)
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
        self._states: dict[int, LiveState] = {}
        self._ops: dict[int, dict[tuple[str, str], tuple[int, float]]] = {}
        """Per rank, the last completed collective of each op and group seen (its bytes and
        seconds), for the node record's per-op sums."""

    def run(self) -> None:
        with contextlib.suppress(Exception):  # no store (it ended with rank 0): nothing to relay
            channel = self.channel = Channel(
                addr=self.addr, port=self.port, key=self.key, job=self.job
            )
            if self.owner:
                channel.put_job()
            elif not self._learn_job(channel):
                return
            self.index = channel.register(self.session)
            if self.world:
                channel.put_world(self.world)
            checked = time.monotonic()
            while not self.done.wait(RELAY_POLL_S):
                if time.monotonic() - checked >= JOB_CHECK_S:
                    checked = time.monotonic()
                    self._check_job(channel)
                self._publish(channel)
                self._answer(channel)
                if self.closed:
                    return

    def _learn_job(self, channel: Channel) -> bool:
        """Wait for the job's id its owner publishes; False when asked to stop first."""
        while not channel.learn_job():
            if self.done.wait(RELAY_POLL_S):
                return False
        self.job = channel.job
        return True

    def _check_job(self, channel: Channel) -> None:
        """The owner puts its id back; another relay follows a changed one, and seals its
        session and states again under it."""
        if self.owner:
            channel.keep_job()
            return
        before = channel.job
        if channel.learn_job() and channel.job != before:
            self.job = channel.job
            channel.put_session(self.index, self.session)
            self._last, self._states = {}, {}

    def _publish(self, channel: Channel) -> None:
        for rank, pid in self.ranks().items():
            if rank not in self._pids:
                channel.put_host(rank, socket.gethostname())
            self._pids[rank] = pid
        changed = {}
        for rank in self._pids:
            raw = self._read(rank)
            if raw and raw != self._last.get(rank):
                changed[rank] = raw
        if changed:
            channel.publish_many(changed)
            self._last.update(changed)
            self._publish_node(channel, changed)

    def _publish_node(self, channel: Channel, changed: dict[int, bytes]) -> None:
        """The node's record (launch/channel/node_record.py) from its ranks' states, after
        those that changed."""
        for rank, raw in changed.items():
            state = parse_live_state(rank, raw)
            if state is None:
                continue
            self._states[rank] = state
            if (done := state.completed) is not None:
                self._ops.setdefault(rank, {})[(state.op, state.group)] = done
        record = node_record(socket.gethostname(), time.time(), self._states, self._ops)
        if record is not None and self.index >= 0:
            channel.publish_node(self.index, record)

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
                        calls = encode_calls(read_last_calls(self.run_dir, rank))
                        channel.put_answer(CALLS, rank, count, calls)
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
        payload = channel.unseal(request_name(self.session, what), value)
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

    def pids(self) -> dict[int, int]:
        """The ranks relayed so far, by pid."""
        return dict(self._pids)

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
        if not self.job:  # the job's id never came: nothing here would open
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
    return live_ranks(run_dir, _descends)


def live_ranks(run_dir: Path, ours: Callable[[int], bool]) -> dict[int, int]:
    """The ranks whose live state file is in ``run_dir`` and whose process ``ours`` keeps,
    by pid (a file that does not read is passed over: a rank writing it, or none)."""
    out = {}
    for path in live_dir(run_dir).glob("rank-*.state"):
        try:
            rank = int(path.stem.removeprefix("rank-"))
            state = parse_live_state(rank, path.read_bytes())
        except (OSError, ValueError):
            continue
        if state is not None and ours(state.pid):
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
