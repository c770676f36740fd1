"""What one poll of the hang watch beside task 0 costs through the job's store, at ``--ranks``
ranks: CPU seconds, store values read and round trips a poll, and the process' peak memory.

A TCPStore in this process holds every rank's live state (sealed for the job, as the relays
publish them: 7 steps in, in an all_reduce) and each node's record (``--per-node`` ranks a
node, launch/channel/node_record.py), as top_connect_cost.py fakes them. The watch's source
(launch/watch/sources.py ``StoreSource``) polls it through a client ``--polls`` times each
way, side by side: every rank's state, as every poll read before (``states``), and a healthy
poll of the records and the ranks none covers (``read``), as now. CPU time is the process'
(user + system, the store's server thread included: the store's side of the job's store is
counted, as top_connect_cost.py does). Apart from them, what the slowdown watch's read of
every rank costs at its cadence now (launch/watch/hang.py ``SLOWDOWN_SHARE``), and the
Python allocations' peak of one poll each way (tracemalloc, after the timings).

Target (issue 50): a healthy poll at 16,384 ranks under 10 % of a core at two polls a second
(50 ms of CPU), with the slowdown watch's share.

    .venv/bin/python benchmarks/hang_watch_poll.py --ranks 16384 --per-node 16 --polls 7
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

from results import record
from top_connect_cost import job_store, node_records

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS / "helpers") not in sys.path:  # run standalone, outside pytest
    sys.path.insert(0, str(TESTS / "helpers"))
from store_jobs import CountingStore  # noqa: E402

TARGET_SHARE = 0.10
POLL_S = 0.5


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4096)
    p.add_argument("--per-node", type=int, default=16)
    p.add_argument("--polls", type=int, default=7)
    return p.parse_args()


def timed(poll, store: CountingStore, count: int) -> tuple[float, float, int, int]:
    """The median CPU and wall seconds of ``count`` polls after a first, and the values and
    requests of one."""
    poll()
    cpu, wall = [], []
    for _ in range(count):
        store.values = store.requests = 0
        store.keys.clear()
        start, start_wall = time.process_time(), time.perf_counter()
        poll()
        cpu.append(time.process_time() - start)
        wall.append(time.perf_counter() - start_wall)
    return statistics.median(cpu), statistics.median(wall), store.values, store.requests


def peak_mib(poll) -> float:
    tracemalloc.start()
    poll()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    args = parse()
    from torch.distributed import TCPStore

    from scalescope.launch.channel.store import Channel
    from scalescope.launch.watch.hang import SLOWDOWN_SHARE
    from scalescope.launch.watch.sources import StoreSource

    server, key, owner, raws = job_store(args.ranks, args.per_node, 60.0)
    node_records(owner, raws, args.per_node)
    client = CountingStore(
        TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=60))
    )
    source = StoreSource(Channel(client, key=key, warn=None), args.ranks)
    every = timed(source.states, client, args.polls)
    healthy = timed(lambda: source.read(False), client, args.polls)
    whole = timed(lambda: source.read(True), client, max(args.polls // 2, 1))
    gap_s = max(POLL_S, whole[1] / SLOWDOWN_SHARE)
    polls_between = gap_s / POLL_S
    share = (healthy[0] * (polls_between - 1) + whole[0]) / gap_s
    mem = peak_mib(source.states), peak_mib(lambda: source.read(False))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    nodes = args.ranks // args.per_node
    print(f"hang watch poll, {args.ranks:,} ranks ({nodes:,} nodes of {args.per_node}):")
    print(f"  every rank's state (before): {every[0]:.3f} s CPU ({every[1]:.3f} s wall), "
          f"{every[2]:,} values in {every[3]:,} requests; "
          f"{every[0] / POLL_S:.0%} of a core at a poll every {POLL_S} s; "
          f"Python peak {mem[0]:.1f} MiB")  # fmt: skip
    print(f"  the node records (now, a healthy poll): {healthy[0]:.4f} s CPU "
          f"({healthy[1]:.4f} s wall), {healthy[2]:,} values in {healthy[3]:,} requests; "
          f"Python peak {mem[1]:.1f} MiB")  # fmt: skip
    print(f"  the slowdown watch's read of every rank: {whole[0]:.3f} s CPU ({whole[1]:.3f} s "
          f"wall), every {gap_s:.1f} s; with the healthy polls {share:.1%} of a core "
          f"(target <= {TARGET_SHARE:.0%})")  # fmt: skip
    print(f"  peak memory of this process (the store's server, {args.ranks:,} states): "
          f"{rss:,.0f} MiB")  # fmt: skip
    record("hang watch poll CPU, node records", healthy[0], "s", "", None,
           f"{args.ranks} ranks; every rank's state {every[0]:.3f} s, {every[2]} values; "
           f"the records {healthy[2]} values")  # fmt: skip
    record("hang watch share of a core with the slowdown watch", share, "ratio",
           f"<= {TARGET_SHARE}", share <= TARGET_SHARE,
           f"{args.ranks} ranks; every rank read every {gap_s:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
