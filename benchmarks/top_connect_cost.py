"""What a frame of `scalescope top --connect` costs at 1,024 ranks: CPU seconds per frame.

A TCPStore in this process holds 1,024 ranks' live states (sealed for the job, as the relays
publish them), the job's id, their hosts (``--per-node`` ranks a node) and the world size; the
view (which learns the job's id there at each frame) then draws ``--frames`` frames into a
string, and the median CPU time (user + system of this process, the store's server thread
included) per frame is printed against the target of 0.5 s. Twice, side by side: first from
every rank's state (relays that publish no node record), then with each node's record
(launch/channel/node_record.py) in the store beside the states, as today's relays publish
them. Apart from it, what a relay spends making and sealing its node's record at each poll.

    .venv/bin/python benchmarks/top_connect_cost.py --ranks 1024 --frames 7
"""

from __future__ import annotations

import argparse
import resource
import secrets
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from results import record

TARGET_S = 0.5


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--frames", type=int, default=7)
    p.add_argument("--per-node", type=int, default=16)
    return p.parse_args()


def published(ranks: int, folder: Path) -> list[bytes]:
    """Each rank's state file as a rank that is 7 steps in, in an all_reduce, would hold."""
    from scalescope.events.live_state_writer import LiveStateWriter

    raws = []
    now = time.perf_counter_ns()
    for rank in range(ranks):
        path = folder / f"rank-{rank}.state"
        writer = LiveStateWriter(path, 1000 + rank, time.time_ns() - now)
        writer.step(7, now - 5_000_000)
        writer.phase("backward", now - 3_000_000)
        writer.enter("all_reduce", "0", 41 + (rank == 77), 9_488, now - 1_000_000)
        raws.append(path.read_bytes())
        writer.close()
    return raws


def frames(channel, count: int) -> tuple[float, float]:
    """The CPU seconds of a new view's first frame, and the median of the next ones."""
    from scalescope.live.store_view import StoreTop

    view = StoreTop(channel)
    console = Console(file=open("/dev/null", "w"), width=160)  # noqa: SIM115
    cpu = []
    for _ in range(count):
        start = time.process_time()
        console.print(view.frame())
        cpu.append(time.process_time() - start)
    return cpu[0], statistics.median(cpu[1:]) if len(cpu) > 1 else cpu[0]


def node_records(channel, raws: list[bytes], per_node: int) -> float:
    """Each node's record published as its relay would; a relay's CPU µs per record (its
    ranks' states parsed, reduced, encoded and sealed; the store's set not counted)."""
    from scalescope.events.live_state import parse_live_state
    from scalescope.launch.channel.node_record import encode, node_record

    spent = 0.0
    for node in range(0, len(raws), per_node):
        index = channel.register(b"session-%d" % node)
        start = time.process_time()
        states = {r: parse_live_state(r, raws[r]) for r in range(node, node + per_node)}
        made = node_record(f"node{node // per_node:04d}", time.time(), states, {})
        channel.seal(b"node:%d:" % index, encode(made))
        spent += time.process_time() - start
        channel.publish_node(index, made)
    return 1e6 * spent / max(len(raws) // per_node, 1)


def job_store(ranks: int, per_node: int, timeout_s: float) -> tuple[Any, bytes, Any, list]:
    """A job's store (its server, key and owner's channel) holding ``ranks`` sealed live
    states, each rank's host named by its node of ``per_node``; and the raw states."""
    from torch.distributed import TCPStore

    from scalescope.launch.channel.seals import new_job_id
    from scalescope.launch.channel.store import Channel

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=timeout_s))  # fmt: skip
    key = secrets.token_bytes(32)
    channel = Channel(server, key=key, job=new_job_id())
    channel.put_job()
    with tempfile.TemporaryDirectory() as tmp:
        raws = published(ranks, Path(tmp))
    for rank, raw in enumerate(raws):
        channel.publish(rank, raw)
        channel.put_host(rank, f"node{rank // per_node:04d}")
    channel.put_world(ranks)
    return server, key, channel, raws


def main() -> None:
    args = parse()
    from torch.distributed import TCPStore

    from scalescope.launch.channel.store import Channel

    server, key, channel, raws = job_store(args.ranks, args.per_node, 30.0)

    def client() -> Channel:
        store = TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=30))
        return Channel(store, key=key)

    before = frames(client(), args.frames)
    record_us = node_records(channel, raws, args.per_node)
    first, rest = frames(client(), args.frames)
    nodes = args.ranks // args.per_node
    print(f"top --connect, {args.ranks} ranks ({nodes} nodes of {args.per_node}): from every "
          f"rank's state first frame {before[0]:.3f} s CPU, then median {before[1]:.3f} s; "
          f"from the node records first {first:.3f} s, then median {rest:.3f} s CPU per frame "
          f"(target <= {TARGET_S} s); a relay's record {record_us:.0f} µs CPU")  # fmt: skip
    print(
        f"peak memory of this process (the store's server, the view or the endpoint, the "
        f"states): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB"
    )
    record("top --connect frame CPU", rest, "s", f"<= {TARGET_S}", rest <= TARGET_S,
           f"{args.ranks} ranks, node records; first frame {first:.3f} s; from every rank's "
           f"state {before[1]:.3f} s (first {before[0]:.3f} s)")  # fmt: skip
    record("top --connect: a relay's node record CPU", record_us, "us", "", None,
           f"{args.per_node} ranks a node")  # fmt: skip


if __name__ == "__main__":
    main()
