"""The ranks' live states over the network: for worlds another launcher started, and for
scalescope's own launch on several nodes.

Under srun or mpirun every task is one rank with its own scalescope process beside it
(launch/run/external.py); nodes may share no file system, and NFS would not show another node's
memory-mapped updates while they happen anyway. So each task's scalescope process relays its
rank's 256-byte live state (read from the local file, where the page cache makes it current)
into the job's own torch.distributed store, the TCPStore at MASTER_ADDR:MASTER_PORT that
every rank already reaches, under ``scalescope/`` keys (launch/channel/relay.py). Task 0's
scalescope process watches the world there (launch/watch/hang.py's ``StoreSource``) and asks
for flushes, stacks and stops through requests the relays poll; a relay answers for its own
rank, on its own node. This module holds those keys (:class:`Channel`) and the store's end.

Whoever reaches the store's port can read and write these keys, so what acts on the job or
what the watcher believes is sealed with the user's key (launch/channel/seals.py), and every
seal covers the job's id besides the value's name: the end that owns the job's channel (the
launcher of node 0, task 0 under srun or mpirun) makes it at random and publishes it, sealed;
the other relays, and ``top``, learn it there (:meth:`Channel.learn_job`). The owner puts it
back when another is found there, and a relay that learnt another one follows (its states are
unknown to the watcher until then). So:

- a relay's session id is sealed with its index;
- a request (flush, stacks, stop) is written to each relay on its own key, with an HMAC over
  that relay's session id (random, published when it connects: no two jobs nor relays share
  one, and nothing has to agree across nodes), the request and a count; a relay honours a
  count above the last it honoured, and ignores (and logs) anything else;
- a relay writes a rank's stacks only in answer to such a request, sealed, and the reader
  deletes them once read;
- a node's record (launch/channel/node_record.py: its ranks' states reduced by its relay, what
  ``top --connect`` and the metrics read at every frame or scrape) is sealed with the relay's
  index, and read like the states: one that does not open, or older than the last one read
  of that relay, makes the node *unknown* (:attr:`Channel.unknown_nodes`), and its ranks are
  read one by one;
- a rank's live state is sealed with its rank. A value that does not open (garbage, a forgery,
  another job's state), or one older than the state of that rank already read (a replay),
  makes the rank's state *unknown* (:attr:`Channel.unknown`), not its last state: someone
  without the key can hide a rank's state, never stand for it. The hang watch never stops
  ranks while one is unknown, and ``top`` shows the rank as unknown.

The world's size, the hosts, the ranks' ends, the slowdown alert and a watch's stop are not
sealed: they name things, and no request follows from them.

The owner closes the store politely: launch/channel/closing.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from scalescope.events.live_state import LiveState, parse_live_state
from scalescope.launch.channel.node_record import NodeRecord, decode, encode
from scalescope.launch.channel.reach import connect
from scalescope.launch.channel.seals import (
    JOB_CONTEXT,
    NOT_SEALED,
    job_context,
    request_name,
    seal,
    unseal,
)

T = TypeVar("T")
PREFIX = "scalescope/"
JOB_KEY = f"{PREFIX}job"
RELAY_POLL_S = 0.25
FLUSH, STACKS, KILL, CLOSE = "flush", "stacks", "kill", "close"
CALLS = "calls"
"""A rank's answer beside its stacks: its flight recorder's last calls, read on its node
(analyze/watch/ring_calls.py ``encode_calls``)."""
REQUESTS = (FLUSH, STACKS, KILL, CLOSE)
WATCHES = ("hang", "slowdown")
MAX_LOGGED = 20
"""Ignored requests or states said at most this often (someone may write many)."""
STORE_OPTION = "live_store"
"""run.json's ``options`` key naming the store (HOST:PORT) where the live states are, so
``top RUN_DIR`` on another node reads them there."""


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


def say(text: str) -> None:
    print(f"scalescope: {text}", file=sys.stderr, flush=True)


class Channel:
    """The ``scalescope/`` keys of one job's store; connected at first use (which waits for
    the server) when given an address instead of a store. ``key`` seals and checks what acts
    (module docstring), for the job ``job`` (learnt from the store when not given: ``top``);
    ``warn`` says, once each, what was ignored for want of it."""

    def __init__(
        self,
        store: Any = None,
        addr: str = "",
        port: int = 0,
        *,
        key: bytes,
        job: bytes = b"",
        warn: Callable[[str], None] | None = say,
    ) -> None:
        self._store, self.addr, self.port, self.key = store, addr, port, key
        self.job = job
        """The job's id every seal here covers; b"" until learnt (then nothing opens)."""
        self.follows = not job
        """Not given the job's id: ``states`` learns it from the store first."""
        self.warn = warn
        self.refused: set[str] = set()
        """What was ignored (each said once)."""
        self.unknown: set[int] = set()
        """The ranks whose state at the last ``states`` did not open with this job's seal, or
        was a replay: what they are doing is not known."""
        self._accepted: dict[int, LiveState] = {}
        self.unknown_nodes: set[int] = set()
        """The relays whose node record at the last ``node_records`` did not open with this
        job's seal, or was a replay."""
        self._records: dict[int, NodeRecord] = {}

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

    def seal(self, name: bytes, payload: bytes) -> bytes:
        return seal(self.key, job_context(self.job, name), payload)

    def unseal(self, name: bytes, value: bytes) -> bytes | None:
        """The payload of a value sealed for this job under ``name``; None otherwise (and
        before the job's id is known)."""
        return unseal(self.key, job_context(self.job, name), value) if self.job else None

    def put_job(self) -> None:
        """Publish the job's id, sealed, for the ends that were not given it."""
        self.store.set(JOB_KEY, seal(self.key, JOB_CONTEXT, self.job))

    def stored_job(self) -> bytes | None:
        """The job's id in the store when sealed with this user's key; None otherwise."""
        if not self.store.check([JOB_KEY]):
            return None
        value = bytes(self.store.get(JOB_KEY))
        job = unseal(self.key, JOB_CONTEXT, value)
        if job is None:
            self.refuse("the job's id", NOT_SEALED, value)
        return job

    def learn_job(self) -> bool:
        """Follow the job's id published in the store: whether one is known. A changed id
        forgets the states read under the last one (their freshness says nothing now)."""
        job = self.stored_job()
        if job is not None and job != self.job:
            self.job, self._accepted, self._records = job, {}, {}
        return bool(self.job)

    def keep_job(self) -> bool:
        """The owner's check that the store holds its job's id; put back (and said) when
        not: the relays that learnt another follow it back. Whether it had to be put back."""
        if self.stored_job() == self.job:
            return False
        self.refuse("another job's id", "this job's is put back")
        self.put_job()
        return True

    def publish(self, rank: int, raw: bytes) -> None:
        self.store.set(f"{PREFIX}live/{rank}", self.seal(b"live:%d:" % rank, raw))

    def publish_many(self, states: dict[int, bytes]) -> None:
        """Ranks' raw live states, each sealed with its rank: one request for a node's."""
        if len(states) == 1:
            [(rank, raw)] = states.items()
            self.publish(rank, raw)
            return
        keys = [f"{PREFIX}live/{rank}" for rank in states]
        values = [self.seal(b"live:%d:" % rank, raw) for rank, raw in states.items()]
        self.store.multi_set(keys, values)

    def states(self, ranks: list[int]) -> dict[int, LiveState]:
        """The states of ``ranks`` that have published one and that open with this job's
        seal; the others are ``unknown`` (``_state``)."""
        if self.follows:
            self.learn_job()
        self.unknown = set()
        return self._opened([(r, f"{PREFIX}live/{r}") for r in ranks], self._state)

    def _present(self, pairs: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """The (index, key) pairs whose key exists: one round trip when all do."""
        if pairs and self.store.check([k for _, k in pairs]):
            return pairs
        return [(i, k) for i, k in pairs if self.store.check([k])]

    def _opened(self, pairs: list[tuple[int, str]], open_one: Callable[[int, bytes], T | None]
                ) -> dict[int, T]:  # fmt: skip
        """The values of the (index, key) pairs whose key exists, in one ``multi_get``, each
        opened by ``open_one`` (None: left out), by index."""
        present = self._present(pairs)
        if not present:
            return {}
        values = self.store.multi_get([k for _, k in present])
        opened = ((i, open_one(i, bytes(v))) for (i, _), v in zip(present, values, strict=True))
        return {i: value for i, value in opened if value is not None}

    def _state(self, rank: int, value: bytes) -> LiveState | None:
        """The rank's state in ``value``; None, and the rank unknown, when that does not open
        with this job's seal or is older than the last one read (a replay): the last state
        would freeze the rank, and the hang watch could act on it. A sealed value that is
        not a state (only the job's relay writes one) leaves the last one."""
        last = self._accepted.get(rank)
        raw = self.unseal(b"live:%d:" % rank, value)
        if raw is None:
            self.unknown.add(rank)
            self.refuse(f"rank {rank}'s live state", NOT_SEALED)
            return None
        state = parse_live_state(rank, raw)
        if state is None:
            return last
        if last is not None and freshness(state) < freshness(last):
            self.unknown.add(rank)
            self.refuse(f"an older live state of rank {rank}", "a replay")
            return None
        self._accepted[rank] = state
        return state

    def publish_node(self, index: int, record: NodeRecord) -> None:
        """Relay ``index``'s record of its node's ranks."""
        self.store.set(f"{PREFIX}node/{index}", self.seal(b"node:%d:" % index, encode(record)))

    def node_records(self) -> dict[int, NodeRecord]:
        """Each relay's node record that opens with this job's seal, by relay index; the
        others are ``unknown_nodes`` (``_record``). None of a relay that publishes none (an
        older scalescope): its ranks are read one by one."""
        if self.follows:
            self.learn_job()
        count = int(self.store.add(f"{PREFIX}relays", 0))
        self.unknown_nodes = set()
        return self._opened([(i, f"{PREFIX}node/{i}") for i in range(count)], self._record)

    def _record(self, index: int, value: bytes) -> NodeRecord | None:
        """As ``_state`` for a rank: not sealed for this job, or older than the last read,
        the node is unknown; sealed but not a record of this version, passed over."""
        raw = self.unseal(b"node:%d:" % index, value)
        if raw is None:
            self.unknown_nodes.add(index)
            self.refuse(f"relay {index}'s node record", NOT_SEALED)
            return None
        record = decode(raw)
        if record is None:
            return None
        last = self._records.get(index)
        if last is not None and record.at_s < last.at_s:
            self.unknown_nodes.add(index)
            self.refuse(f"an older node record of relay {index}", "a replay")
            return None
        self._records[index] = record
        return record

    def register(self, session: bytes) -> int:
        """A relay's index, its session id published for the watcher to seal requests to."""
        index = int(self.store.add(f"{PREFIX}relays", 1)) - 1
        self.put_session(index, session)
        return index

    def put_session(self, index: int, session: bytes) -> None:
        """Sealed with its index: no one can name a session of their own (or another job's
        relay's) for the watcher to seal requests to."""
        self.store.set(f"{PREFIX}relay/{index}", self.seal(b"relay:%d:" % index, session))

    def sessions(self) -> list[tuple[int, bytes]]:
        """Each registered relay's index and session id, those sealed for this job."""
        count = int(self.store.add(f"{PREFIX}relays", 0))
        pairs = [(i, f"{PREFIX}relay/{i}") for i in range(count)]
        return list(self._opened(pairs, self._session).items())

    def _session(self, index: int, value: bytes) -> bytes | None:
        session = self.unseal(b"relay:%d:" % index, value)
        if session is None:
            self.refuse(f"relay {index}'s session", NOT_SEALED, value)
        return session

    def ask(self, what: str, relays: Collection[int] | None = None) -> int:
        """Ask every relay (or those of index in ``relays``) for ``what`` (flush, stacks,
        kill), sealed to each one's session; the request's count, which also names the stacks
        that answer it."""
        count = int(self.store.add(f"{PREFIX}ask_count", 1))
        sessions = [(i, s) for i, s in self.sessions() if relays is None or i in relays]
        if sessions:
            keys = [f"{PREFIX}ask/{i}/{what}" for i, _ in sessions]
            values = [self.seal(request_name(s, what), b"%d" % count) for _, s in sessions]
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

    def put_answer(self, what: str, rank: int, count: int, raw: bytes) -> None:
        """A rank's answer to request ``count`` (``stack``: its stacks; ``calls``: its
        ring's last calls), sealed with the rank and the count."""
        name = b"%s:%d:%d:" % (what.encode(), rank, count)
        self.store.set(f"{PREFIX}{what}/{rank}/{count}", self.seal(name, raw))

    def answer(self, what: str, rank: int, count: int) -> bytes | None:
        """Rank ``rank``'s ``what`` in answer to request ``count``, deleted once read; None
        before the relay answered (or when what is there is not sealed)."""
        key = f"{PREFIX}{what}/{rank}/{count}"
        if not self.store.check([key]):
            return None
        value = bytes(self.store.get(key))
        self.store.delete_key(key)
        raw = self.unseal(b"%s:%d:%d:" % (what.encode(), rank, count), value)
        if raw is None:
            self.refuse(f"rank {rank}'s {what}", NOT_SEALED)
        return raw

    def put_stack(self, rank: int, count: int, text: str) -> None:
        self.put_answer("stack", rank, count, text.encode())

    def stack(self, rank: int, count: int) -> str | None:
        """Rank ``rank``'s stacks in answer to request ``count`` (``answer``)."""
        raw = self.answer("stack", rank, count)
        return None if raw is None else raw.decode("utf-8", "replace")

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

    def put_watch_stop(self, watch: str, error: str) -> None:
        """A watch of the store's owner stopped on ``error`` (events/watch_stops.py)."""
        self.store.set(f"{PREFIX}stopped/{watch}", error.encode())

    def watch_stops(self) -> dict[str, str]:
        """The watches that stopped, with their errors, for ``top --connect``."""
        keys = {w: f"{PREFIX}stopped/{w}" for w in WATCHES}
        return {
            w: bytes(self.store.get(k)).decode("utf-8", "replace")
            for w, k in keys.items()
            if self.store.check([k])
        }

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
