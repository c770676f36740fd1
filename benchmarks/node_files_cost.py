"""What writing node files live costs a node's relay (events/node_live.py, issue 50 item 2).

The generator (synthetic_nodes.py) writes ``--ranks`` ranks' files of ``--steps`` steps; they
are then appended again, 20 steps per message as the probe flushes, into a fresh run
directory, and a ``NodeFollower`` polls after each round of appends, as the relay does every
second, writing each window of ``--window`` steps as the ranks pass it. Its CPU time
(``time.thread_time``) over the whole run, per rank-step, gives the share of one core a node
of 16 ranks costs at a step of ``--step-ms``: the figure that decides whether node files are
written by default (under 1 % of a core) or on request.

    PYTHONPATH=src .venv/bin/python benchmarks/node_files_cost.py --ranks 16 --steps 1000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from results import record
from scalescope.events.files import events_path
from scalescope.events.node_live import NodeFollower
from scalescope.events.reader import read_event_stream
from synthetic_nodes import write_scale_run

FIGURE = "node files written live: the relay's CPU share of one core at 16 ranks a node"
FLUSH_STEPS = 20


def chunks(table: pa.Table, steps: int, calls_x: int) -> list[pa.Table]:
    """The rank's rows in messages of FLUSH_STEPS steps (the probe's flush), each collective
    row repeated ``calls_x`` times (a step of many more calls: FSDP's units)."""
    if calls_x > 1:
        repeat = np.where(table.column("kind").to_numpy() == 1, calls_x, 1)
        table = table.take(pa.array(np.repeat(np.arange(table.num_rows), repeat)))
    step = table.column("step").to_numpy()
    return [table.filter(pa.array((step >= a) & (step < a + FLUSH_STEPS)))
            for a in range(-1, steps, FLUSH_STEPS)]  # fmt: skip


def replay(
    src: Path, dst: Path, ranks: int, steps: int, window: int, calls_x: int
) -> tuple[float, int]:
    """The follower's CPU seconds over the run replayed into ``dst``, and the calls read."""
    parts = {r: chunks(read_event_stream(events_path(src, r)).table, steps, calls_x)
             for r in range(ranks)}  # fmt: skip
    events_path(dst, 0).parent.mkdir(parents=True, exist_ok=True)
    writers = {}
    for r in range(ranks):
        sink = pa.OSFile(str(events_path(dst, r)), "wb")
        writers[r] = (sink, pa.ipc.new_stream(sink, parts[r][0].schema))
    follower = NodeFollower(dst, 0, window, ranks, ranks)
    follower.add_ranks(list(range(ranks)))
    cpu = 0.0
    for i in range(len(parts[0])):
        for r in range(ranks):
            writers[r][1].write_table(parts[r][i])
            writers[r][0].flush()
        began = time.thread_time()
        follower.poll()
        cpu += time.thread_time() - began
    for sink, writer in writers.values():
        writer.close()
        sink.close()
    began = time.thread_time()
    follower.finish()
    cpu += time.thread_time() - began
    calls = sum(int((p.column("kind").to_numpy() == 1).sum()) for ps in parts.values() for p in ps)
    return cpu, calls


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--window", type=int, default=500)
    p.add_argument("--step-ms", type=float, default=100.0, help="the step time costed")
    p.add_argument("--calls-x", type=int, default=1, help="each collective row repeated")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "src", Path(tmp) / "dst"
        write_scale_run(src, args.ranks, args.steps, None, seed=1, sample_every=0)
        cpu, calls = replay(src, dst, args.ranks, args.steps, args.window, args.calls_x)
    per_rank_step = cpu / (args.ranks * args.steps)
    share = 16 * per_rank_step / (args.step_ms / 1e3)
    windows = int(np.ceil(args.steps / args.window))
    print(f"{args.ranks} ranks x {args.steps} steps, {calls / args.ranks / args.steps:.1f} "
          f"calls/step: {cpu:.3f} s CPU ({cpu / windows * 1e3:.0f} ms per window of "
          f"{args.window}), {per_rank_step * 1e6:.1f} us per rank-step; 16 ranks at "
          f"{args.step_ms:.0f} ms/step: {share * 100:.3f} % of a core")  # fmt: skip
    record(FIGURE, share * 100, "% of a core", "< 1", share < 0.01,
           f"{per_rank_step * 1e6:.1f} us per rank-step, {calls / args.ranks / args.steps:.1f} "
           f"calls/step, step {args.step_ms:.0f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
