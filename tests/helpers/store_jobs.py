"""A job's store as the relays fill it, without ranks: every rank's sealed live state and
each node's record (launch/channel/node_record.py), and a channel that counts the ranks' states
each read asks for, and a client store that counts the values it fetched. For top --connect's
view, the hang watch's source and benchmarks/hang_watch_poll.py."""

from __future__ import annotations

import time
from typing import Any

from torch.distributed import TCPStore

from scalescope.launch.channel.store import Channel

KEY, JOB = b"k" * 32, b"j" * 32


class CountingStore:
    """A client store that counts the values it fetched (``keys``: theirs) and its
    requests."""

    def __init__(self, store: Any) -> None:
        self.store, self.values, self.requests = store, 0, 0
        self.keys: list[str] = []

    def multi_get(self, keys: list[str]) -> list[bytes]:
        self.values, self.requests = self.values + len(keys), self.requests + 1
        self.keys += keys
        return self.store.multi_get(keys)

    def get(self, key: str) -> bytes:
        self.values, self.requests = self.values + 1, self.requests + 1
        self.keys.append(key)
        return self.store.get(key)

    def ranks_read(self, prefix: str = "scalescope/live/") -> list[int]:
        """The ranks (or relays, with ``scalescope/node/``) whose values were fetched."""
        return sorted(int(k.removeprefix(prefix)) for k in self.keys if k.startswith(prefix))

    def __getattr__(self, name: str) -> Any:
        self.requests += 1
        return getattr(self.store, name)


class Reading(Channel):
    """The view's channel, noting how many ranks' states each frame asked for."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.asked: list[int] = []

    def states(self, ranks: list[int]):
        self.asked.append(len(ranks))
        return super().states(ranks)


def published_job(tmp_path, ranks: int, per_node: int, stuck: int, since_s: float,
                  stall: bool = False):  # fmt: skip
    """A job's store with ``ranks`` ranks' sealed states (every rank 7 steps in, in
    all_reduce #41 for 1 s; rank ``stuck`` in #40 for ``since_s``, its last step ended
    ``since_s`` ago), and each node's record as its relay publishes it. With ``stall``, every
    rank's step ended ``since_s`` ago and rank ``stuck`` left #40 then. The owner's channel,
    and the raw state of each rank by node."""
    from scalescope.events.live_state_writer import LiveStateWriter

    owner = job_store(ranks)
    perf = time.perf_counter_ns()
    offset = time.time_ns() - perf
    nodes: dict[int, dict[int, bytes]] = {}
    for rank in range(ranks):
        w = LiveStateWriter(tmp_path / f"rank-{rank}.state", 1000 + rank, offset)
        late = rank == stuck
        w.step(7, perf - int((since_s if late or stall else 1.5) * 1e9))
        w.enter("all_reduce", "0", 40 if late else 41, 9488,
                perf - int((since_s if late else 1.0) * 1e9))  # fmt: skip
        if late and stall:
            w.leave("0", 40, perf - int((since_s - 0.1) * 1e9))
        nodes.setdefault(rank // per_node, {})[rank] = (
            tmp_path / f"rank-{rank}.state"
        ).read_bytes()
        w.close()
    publish_nodes(owner, nodes)
    return owner, nodes


def job_store(ranks: int) -> Channel:
    """The owner's channel of a new job's store of ``ranks`` ranks."""
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    owner = Channel(server, key=KEY, job=JOB)
    owner.put_job()
    owner.put_world(ranks)
    return owner


def publish_nodes(owner: Channel, nodes: dict[int, dict[int, bytes]]) -> None:
    """Each node's raw states (by rank) sealed, its record and its ranks' host, as a relay."""
    from scalescope.events.live_state import parse_live_state
    from scalescope.launch.channel.node_record import node_record

    for node, raws in nodes.items():
        index = owner.register(b"session-%d" % node)
        owner.publish_many(raws)
        states = {r: parse_live_state(r, raw) for r, raw in raws.items()}
        owner.publish_node(index, node_record(f"node{node}", time.time(), states, {}))
        for rank in raws:
            owner.put_host(rank, f"node{node}")
