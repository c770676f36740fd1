"""A hang at 16,384 ranks named from the flight recorders (issue 50: "a hang ... at 16,384
ranks (synthetic) still names the rank and the call from the ring").

benchmarks/synthetic_rings.py writes one ring a rank (``--rows`` rows each) of a DDP job in
which one rank never completed an all_reduce its peers completed; then, in a fresh process
(its peak memory its own), the launcher's hang watch (launch/watch/hang.py ``on_hang``) reads
them as it reads a live job's and writes hang.json and hang.txt. Measured:

- **from one node**: ``on_hang`` over every ring (a shared run directory), its wall time and
  the process' peak resident memory;
- **per node**: what each node's relay would do for its own 8 ranks (their rings' last
  calls), the median over 64 nodes, and node 0's merge of every rank's last calls into the
  verdict (``ring_verdicts``): the hang named in one node's time plus the merge.

Target: the stuck rank and its call named exactly (``unfinished`` verdict), both ways.

    .venv/bin/python benchmarks/ring_hang_scale.py --ranks 16384 --rows 1024
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import psutil

from results import record
from scalescope.analyze.watch.ring_calls import read_last_calls
from scalescope.analyze.watch.ring_hang import UNFINISHED, ring_verdicts
from scalescope.events.files import HANG_FILE
from scalescope.launch.options.groups import HangOptions
from scalescope.launch.watch.hang import HangWatch
from scalescope.report.views.hang import render_hang
from synthetic_rings import RecordedSource, write_rings

RANKS_PER_NODE = 8
NODES_SAMPLED = 64


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=16_384)
    p.add_argument("--rows", type=int, default=1024, help="rows each ring holds")
    p.add_argument("--dir", type=Path, help="where the rings go (default: a temporary folder)")
    p.add_argument("--analyse", type=Path, help=argparse.SUPPRESS)
    return p.parse_args()


def analyse(run_dir: Path) -> dict:
    """In the child: ``on_hang`` over every ring, then the per-node reading."""
    states = pickle.loads((run_dir / "states.pickle").read_bytes())
    ranks = len(states)
    before_kib = psutil.Process().memory_info().rss / 1024
    options = HangOptions(after_s=30.0, slowdown_pct=0.0, render=render_hang)
    watch = HangWatch(run_dir, ranks, options, RecordedSource(states))
    t0 = time.perf_counter()
    watch.on_hang(states, idle=60.0, threshold=30.0)
    one_node_s = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    named = [v for v in watch.report.verdicts if v.kind == UNFINISHED]
    nodes = range(0, ranks // RANKS_PER_NODE, max(1, ranks // RANKS_PER_NODE // NODES_SAMPLED))
    node_s, by_rank = [], {}
    for node in nodes:
        t0 = time.perf_counter()
        for rank in range(node * RANKS_PER_NODE, (node + 1) * RANKS_PER_NODE):
            by_rank[rank] = read_last_calls(run_dir, rank)[0]
        node_s.append(time.perf_counter() - t0)
    hangs = [replace(r, last_calls=by_rank.get(r.rank, r.last_calls)) for r in watch.report.ranks]
    t0 = time.perf_counter()
    merged = ring_verdicts(hangs)
    merge_s = time.perf_counter() - t0
    return {
        "one_node_s": one_node_s, "peak_mib": peak_kib / 1024, "before_mib": before_kib / 1024,
        "named": [(v.ranks, v.op, v.seq, v.nbytes) for v in named],
        "merged": [(v.ranks, v.op, v.seq, v.nbytes) for v in merged if v.kind == UNFINISHED],
        "node_ms": 1e3 * statistics.median(node_s), "merge_ms": 1e3 * merge_s,
        "hang_json_mib": (run_dir / HANG_FILE).stat().st_size / 2**20,
    }  # fmt: skip


def child(run_dir: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--analyse", str(run_dir)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    args = parse()
    if args.analyse is not None:
        print(json.dumps(analyse(args.analyse)))
        return
    run_dir = args.dir or Path(tempfile.mkdtemp(prefix="ring-hang-"))
    try:
        hang = write_rings(run_dir, args.ranks, args.rows)
        (run_dir / "states.pickle").write_bytes(pickle.dumps(hang.states))
        size = sum(p.stat().st_blocks * 512 for p in (run_dir / "live").iterdir())
        print(f"{args.ranks:,} rings of {args.rows:,} rows written in {hang.write_s:.1f} s "
              f"({size / 2**30:.2f} GiB on disk); rank {hang.stuck_rank} stuck in "
              f"{hang.op} #{hang.seq}")  # fmt: skip
        got = child(run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    truth = [[[hang.stuck_rank], hang.op, hang.seq, hang.nbytes]]
    report(args.ranks, got, truth)


def report(ranks: int, got: dict, truth: list) -> None:
    named, merged = got["named"] == truth, got["merged"] == truth
    print(f"from one node: on_hang {got['one_node_s']:.2f} s, peak {got['peak_mib']:.0f} MiB "
          f"({got['before_mib']:.0f} MiB resident before it), hang.json "
          f"{got['hang_json_mib']:.1f} MiB; named {got['named']} "
          f"({'right' if named else 'WRONG'})")  # fmt: skip
    print(f"per node: {got['node_ms']:.1f} ms a node of {RANKS_PER_NODE} ranks (median of "
          f"{NODES_SAMPLED}), node 0's merge {got['merge_ms']:.0f} ms; named {got['merged']} "
          f"({'right' if merged else 'WRONG'})")  # fmt: skip
    where = f"{ranks:,} ranks"
    record(f"hang named from the rings, one node reading all ({where})", float(named), "bool",
           "1", named, f"on_hang {got['one_node_s']:.2f} s")  # fmt: skip
    record(f"hang's report from every ring on one node ({where})", got["one_node_s"], "s", "",
           None)  # fmt: skip
    record(f"hang's report peak memory ({where})", got["peak_mib"], "MiB", "", None,
           f"{got['before_mib']:.0f} MiB resident before it")  # fmt: skip
    record(f"rings' last calls read per node ({RANKS_PER_NODE} ranks)", got["node_ms"], "ms",
           "", None)  # fmt: skip
    record(f"hang named from per-node last calls, node 0's merge ({where})", got["merge_ms"],
           "ms", "", merged, f"named right: {merged}")  # fmt: skip
    if not (named and merged):
        sys.exit(1)


if __name__ == "__main__":
    main()
