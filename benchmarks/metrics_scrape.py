"""What a Prometheus scrape of the run's metrics costs the watch beside the launcher, at
``--ranks`` ranks: their live state files written once (events/live_state.py, with running
totals), read as the watch reads them, then ``--scrapes`` scrapes of the endpoint over HTTP
on 127.0.0.1, the watch process' CPU time per scrape measured (``time.process_time``: every
thread of this process; the scraper's share is the HTTP client's, counted too, so the figure
is an upper bound). The ranks do nothing for a scrape: it reads what the watch holds.

Target (issue 41): at most 50 ms of the watch's CPU per scrape at 1,024 ranks (median).

    .venv/bin/python benchmarks/metrics_scrape.py --ranks 1024 --scrapes 20
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
from scalescope.events.files import live_state_path  # noqa: E402
from scalescope.events.live_state import LiveStateWriter, read_live_states  # noqa: E402
from scalescope.launch.metrics import MetricsEndpoint  # noqa: E402


def write_states(run_dir: Path, ranks: int) -> None:
    for rank in range(ranks):
        w = LiveStateWriter(live_state_path(run_dir, rank), pid=rank + 1, wall_minus_perf_ns=0)
        for phase in ("data", "forward", "backward", "comm_wait", "optimizer"):
            w.add_phase(phase, 1_000_000 * (rank % 7 + 1))
        w.add_collective(3_000_000)
        w.add_step(20_000_000, 32)
        w.step(100, 1)
        w.close()


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
        write_states(Path(tmp), args.ranks)
        endpoint = MetricsEndpoint("bench", lambda r: f"node{r // 8:03d}", port, per=args.per)
        endpoint.bind()
        endpoint.latest.states = read_live_states(Path(tmp), args.ranks)
        cpu_ms, size = [], 0
        try:
            for _ in range(args.scrapes):
                before = time.process_time()
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                    size = len(r.read())
                cpu_ms.append(1e3 * (time.process_time() - before))
        finally:
            endpoint.close()
    median = statistics.median(cpu_ms)
    met = median <= 50.0
    judged = args.per != "rank"  # series per rank at 1,024 ranks: for the record only
    print(f"{args.ranks} ranks, per {args.per}: {size / 1e3:,.0f} kB a scrape, CPU "
          f"{median:.1f} ms median ({min(cpu_ms):.1f}-{max(cpu_ms):.1f})  "
          f"{'pass' if met else 'FAIL'}")  # fmt: skip
    record(f"metrics: the watch's CPU per scrape at {args.ranks} ranks (per {args.per})", median,
           "ms", "<= 50" if judged else "", met if judged else None,
           f"{size / 1e3:,.0f} kB, {args.scrapes} scrapes")  # fmt: skip
    return int(judged and not met)


if __name__ == "__main__":
    sys.exit(main())
