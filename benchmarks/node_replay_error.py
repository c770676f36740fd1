"""The what-if at scale (analyze/scale/node_replay.py: nodes as units over sampled steps)
against the full what-if (analyze/model/whatif.py over every rank's rows) and against the
re-run's truth, at sizes where every rank's file fits (issue 50, item 3).

Each size: a run with a slow node (synthetic_nodes.py with every rank's file and the node
files), the gain of ``node:HOST`` by the full what-if (``Recording.what_if``) and by the node
replay, and the measured gain: the same run regenerated without the plant (the same noise
draws) less this one, step for step.

    .venv/bin/python benchmarks/node_replay_error.py --ranks 1024,4096
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from results import record
from scalescope.analyze.scale.node_replay import node_gains
from scalescope.analyze.scale.scan import scan
from scalescope.diagnose.recording import Recording
from scalescope.events.node_file import read_manifest
from scalescope.events.run import load_meta
from synthetic_nodes import write_scale_run


def one(ranks: int, steps: int, root: Path) -> dict:
    run = root / f"slow-{ranks}"
    truth = write_scale_run(run, ranks, steps, "slow_node", seed=7, sample_every=0)
    clean = write_scale_run(root / f"clean-{ranks}", ranks, steps, None, seed=7, sample_every=0)
    measured = truth.step_ms - clean.step_ms
    shutil.rmtree(root / f"clean-{ranks}")
    t0 = time.perf_counter()
    manifest = read_manifest(run)
    node = next(e.node for e in manifest.nodes if e.host == truth.slow_node)
    s = scan(run, manifest, load_meta(run).warmup_steps or 0)
    scale = next(g for g in node_gains(s) if g.node == node)
    scale_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    whatif = Recording.load(run).what_if([f"node:{truth.slow_node}"])
    full = whatif.fixes[0].gain_ms if whatif is not None and whatif.fixes else float("nan")
    full_s = time.perf_counter() - t0
    shutil.rmtree(run)
    return {"ranks": ranks, "measured": measured, "full": full, "scale": scale.gain_ms,
            "low": scale.low_ms, "high": scale.high_ms, "full_s": full_s, "scale_s": scale_s,
            "steps": scale.steps}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="1024,4096")
    p.add_argument("--steps", type=int, default=1000)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="node-replay-", dir="/tmp"))
    print(f"{'ranks':>6} {'measured ms':>12} {'full replay':>12} {'node replay':>12} "
          f"{'95 %':>13} {'vs full':>8} {'vs measured':>12} {'full s':>7} "
          f"{'node s':>7}")  # fmt: skip
    try:
        for ranks in (int(r) for r in args.ranks.split(",")):
            r = one(ranks, args.steps, root)
            vs_full = r["scale"] / r["full"] - 1
            vs_measured = r["scale"] / r["measured"] - 1
            print(f"{ranks:>6,} {r['measured']:>12.1f} {r['full']:>12.1f} {r['scale']:>12.1f} "
                  f"{r['low']:>6.1f}-{r['high']:<6.1f} {vs_full:>+8.0%} {vs_measured:>+12.0%} "
                  f"{r['full_s']:>7.1f} {r['scale_s']:>7.1f}")  # fmt: skip
            record(f"node replay's gain against the full replay, {ranks:,} ranks",
                   vs_full * 100, "%", "", None, f"node {r['scale']:.1f} ms, full "
                   f"{r['full']:.1f} ms, measured {r['measured']:.1f} ms over {r['steps']} "
                   "sampled steps")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
