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
rank and per node. The first scrape, which reads every rank's meta file once for its labels,
is printed apart.

    .venv/bin/python benchmarks/metrics_scrape.py --ranks 1024 --scrapes 20 --per rank
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from results import record  # noqa: E402
from scalescope.events.files import live_state_path, rank_meta_path  # noqa: E402
from scalescope.events.live_state import read_live_states  # noqa: E402
from scalescope.events.live_state_writer import LiveStateWriter  # noqa: E402
from scalescope.events.run import GroupMeta, RankMeta, write_json_atomic  # noqa: E402
from scalescope.launch.metrics.endpoint import MetricsEndpoint  # noqa: E402

PER_NODE = 8
WALL_NS = 1_700_000_000 * 10**9


def write_ranks(run_dir: Path, ranks: int) -> None:
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
        meta = RankMeta(rank=rank, local_rank=rank % PER_NODE, world_size=ranks,
                        hostname=f"node{rank // PER_NODE:03d}", groups=world)  # fmt: skip
        write_json_atomic(rank_meta_path(run_dir, rank), meta)


def scrape(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return len(r.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--per", default="auto", choices=("rank", "node", "auto"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="metrics-scrape-") as tmp, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        write_ranks(Path(tmp), args.ranks)
        gpus = tuple(str(i) for i in range(PER_NODE))
        endpoint = MetricsEndpoint("bench", None, port, per=args.per, run_dir=Path(tmp),
                                   world_size=args.ranks, gpus=gpus)  # fmt: skip
        endpoint.bind()
        states = read_live_states(Path(tmp), args.ranks)
        try:
            endpoint.latest.observe(states)
            before = time.process_time()
            scrape(port)
            first_ms = 1e3 * (time.process_time() - before)
            cpu_ms, observe_ms, size = [], [], 0
            for _ in range(args.scrapes):
                before = time.process_time()
                endpoint.latest.observe(states)
                observed = time.process_time()
                size = scrape(port)
                observe_ms.append(1e3 * (observed - before))
                cpu_ms.append(1e3 * (time.process_time() - observed))
        finally:
            endpoint.close()
    median = statistics.median(cpu_ms)
    met = median <= 50.0
    print(f"{args.ranks} ranks, per {endpoint.collector.per}: {size / 1e3:,.0f} kB a scrape, "
          f"CPU {median:.1f} ms median ({min(cpu_ms):.1f}-{max(cpu_ms):.1f}), the first "
          f"{first_ms:.0f} ms; observe {statistics.median(observe_ms):.2f} ms a read of the "
          f"watch  {'pass' if met else 'FAIL'}")  # fmt: skip
    record(f"metrics: the watch's CPU per scrape at {args.ranks} ranks (per {args.per})", median,
           "ms", "<= 50", met, f"{size / 1e3:,.0f} kB, {args.scrapes} scrapes, the first "
           f"{first_ms:.0f} ms")  # fmt: skip
    return int(not met)


if __name__ == "__main__":
    sys.exit(main())
