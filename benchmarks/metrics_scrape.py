"""What a Prometheus scrape of the run's metrics costs the watch beside the launcher, at
``--ranks`` ranks: their live state files (events/live_state.py, with running totals and a
completed all_reduce each) and meta files (hostname, local rank, the world group) written
once, read as the watch reads them, then ``--scrapes`` scrapes of the endpoint over HTTP on
127.0.0.1, each after one read of the watch (``Latest.observe``: a scrape between two reads
would reuse the last text). The watch process' CPU time per scrape is measured
(``time.process_time``: every thread of this process; the scraper's share is the HTTP
client's, counted too, so the figure is an upper bound), and apart from it what ``observe``
adds to each read of the watch. The ranks do nothing for a scrape: it reads what the watch
holds.

Target (issue 41): at most 50 ms of the watch's CPU per scrape at 1,024 ranks (median), per
rank and per node; issue 50: per node at 16,384 ranks. The first scrape, which reads every
rank's meta file once for its labels, is printed apart. Per node (``--per node``, or ``auto``
beyond 256 ranks) it is measured twice in one run, side by side: from every rank's state,
then from the nodes' records (launch/channel/node_record.py, one per ``--per-node`` ranks,
as the relays publish them and the watch reads them with the states), on a second endpoint.

    .venv/bin/python benchmarks/metrics_scrape.py --ranks 1024 --scrapes 20 --per rank
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from results import record  # noqa: E402
from scalescope.events.files import live_state_path, rank_meta_path  # noqa: E402
from scalescope.events.live_state import read_live_states  # noqa: E402
from scalescope.events.live_state_writer import LiveStateWriter  # noqa: E402
from scalescope.events.run import GroupMeta, RankMeta, write_json_atomic  # noqa: E402
from scalescope.launch.channel.node_record import NodesRead, node_record  # noqa: E402
from scalescope.launch.metrics.endpoint import MetricsEndpoint  # noqa: E402

PER_NODE = 8
WALL_NS = 1_700_000_000 * 10**9


def write_ranks(run_dir: Path, ranks: int, per_node: int) -> None:
    world = {"0": GroupMeta(ranks=list(range(ranks)))}
    for rank in range(ranks):
        w = LiveStateWriter(
            live_state_path(run_dir, rank), pid=rank + 1, wall_minus_perf_ns=WALL_NS
        )
        for phase in ("data", "forward", "backward", "comm_wait", "optimizer"):
            w.add_phase(phase, 1_000_000 * (rank % 7 + 1))
        w.add_collective(3_000_000)
        w.add_step(20_000_000, 32)
        w.step(100, 10**9)
        w.enter("all_reduce", "0", 300, 25 << 20, 10**9 - 3_000_000)
        w.leave("0", 300, 10**9)
        w.close()
        meta = RankMeta(rank=rank, local_rank=rank % per_node, world_size=ranks,
                        hostname=host(rank, per_node), groups=world)  # fmt: skip
        write_json_atomic(rank_meta_path(run_dir, rank), meta)


def host(rank: int, per_node: int) -> str:
    return f"node{rank // per_node:04d}"


def scrape(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return len(r.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Scrapes:
    """One endpoint's scrapes: the first's CPU, the others', what ``observe`` took, the size."""

    first_ms: float
    cpu_ms: list[float]
    observe_ms: list[float]
    size: int
    per: str

    def line(self, what: str) -> str:
        median = statistics.median(self.cpu_ms)
        return (f"{what}: {self.size / 1e3:,.0f} kB a scrape, CPU {median:.1f} ms median "
                f"({min(self.cpu_ms):.1f}-{max(self.cpu_ms):.1f}), the first "
                f"{self.first_ms:.0f} ms; observe {statistics.median(self.observe_ms):.2f} ms "
                "a read of the watch")  # fmt: skip


def measure(run_dir: Path, args: argparse.Namespace, states, nodes: NodesRead | None) -> Scrapes:
    """``args.scrapes`` scrapes of a new endpoint, each after a read of the watch."""
    port = free_port()
    gpus = tuple(str(i) for i in range(args.per_node))
    endpoint = MetricsEndpoint("bench", None, port, per=args.per, run_dir=run_dir,
                               world_size=args.ranks, gpus=gpus)  # fmt: skip
    endpoint.bind()
    try:
        endpoint.latest.observe(states, nodes)
        before = time.process_time()
        scrape(port)
        first_ms = 1e3 * (time.process_time() - before)
        cpu_ms, observe_ms, size = [], [], 0
        for _ in range(args.scrapes):
            before = time.process_time()
            endpoint.latest.observe(states, nodes)
            observed = time.process_time()
            size = scrape(port)
            observe_ms.append(1e3 * (observed - before))
            cpu_ms.append(1e3 * (time.process_time() - observed))
    finally:
        endpoint.close()
    return Scrapes(first_ms, cpu_ms, observe_ms, size, endpoint.collector.per)


def records(states, per_node: int) -> NodesRead:
    """Each node's record as its relay publishes it (its ranks' completed all_reduce)."""
    ops = {r: {(s.op, s.group): s.completed} for r, s in states.items() if s.completed}
    made = []
    for first in range(0, len(states), per_node):
        mine = {r: states[r] for r in range(first, min(first + per_node, len(states)))}
        made.append(node_record(host(first, per_node), time.time(), mine, ops))
    return NodesRead(tuple(made))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--per", default="auto", choices=("rank", "node", "auto"))
    ap.add_argument("--per-node", type=int, default=PER_NODE)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="metrics-scrape-") as tmp:
        run_dir = Path(tmp)
        write_ranks(run_dir, args.ranks, args.per_node)
        states = read_live_states(run_dir, args.ranks)
        ranks = measure(run_dir, args, states, None)
        nodes = None
        if ranks.per == "node":
            nodes = measure(run_dir, args, states, records(states, args.per_node))
    print(ranks.line(f"{args.ranks} ranks, per {ranks.per}, from every rank's state"))
    figure = ranks
    if nodes is not None:
        print(nodes.line(f"{args.ranks} ranks, per node, from the nodes' records"))
        figure = nodes
    median = statistics.median(figure.cpu_ms)
    met = median <= 50.0
    print(
        f"peak memory of this process (the store's server, the view or the endpoint, the "
        f"states): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB"
    )
    print("pass" if met else "FAIL")
    source = "node records" if figure is nodes else "rank states"
    record(f"metrics: the watch's CPU per scrape at {args.ranks} ranks (per {args.per})", median,
           "ms", "<= 50", met, f"{source}; {figure.size / 1e3:,.0f} kB, {args.scrapes} scrapes, "
           f"the first {figure.first_ms:.0f} ms; from every rank's state "
           f"{statistics.median(ranks.cpu_ms):.1f} ms")  # fmt: skip
    return int(not met)


if __name__ == "__main__":
    sys.exit(main())
