"""`scalescope report RUN --json` of runs with node files (issue 50, items 3 and 4): the
generator's runs (synthetic_nodes.py: node files of every node, rank files of 1 rank in 64
nodes and the planted ones) of a slow node, a slow link (the pipeline layout: pairs of ranks
cross it) and jitter only, each reported in a fresh child: its wall time and peak resident
memory (wait4), the planted culprit named first and "no bottleneck" on jitter only.

Targets (issue 50): 16,384 ranks x 1,000 steps in <= 60 s and <= 4 GiB; 65,536 ranks x 1,000
steps in <= 5 minutes and <= 8 GiB (``--full``; the slow node case only: 65,536 ranks of the
pipeline layout write ~16 GB of node files). The generation is timed too (vectorised numpy,
in make bench's time). The default size is 4,096 ranks (generate and report the three cases
in ~3 minutes here); ``--ranks 16384`` for the target.

    .venv/bin/python benchmarks/analyze_scale.py                    # 4,096 ranks, 3 cases
    .venv/bin/python benchmarks/analyze_scale.py --ranks 16384
    .venv/bin/python benchmarks/analyze_scale.py --full             # + 65,536 ranks
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from analyze_speed import run_child
from results import record
from synthetic_nodes import write_scale_run

GIB = 1024**3
TARGETS = {16384: (60.0, 4.0), 65536: (300.0, 8.0)}
"""ranks -> (seconds, GiB) of the report."""
CASES = {"slow_node": ("ddp", "slow_node"), "slow_link": ("pipeline", "slow_link"),
         "jitter": ("ddp", None)}  # fmt: skip
ROOT = Path("/tmp/scale-runs")


def named_first(case: str, truth, data: dict) -> bool:
    """The planted culprit first, or no bottleneck on jitter only."""
    verdict = data["verdict"]
    if truth.plant is None:
        return verdict["state"] == "no bottleneck"
    causes = verdict["causes"]
    culprit = causes[0]["culprit"] if causes else None
    if culprit is None:
        return False
    if truth.plant == "slow_node":
        return (culprit["kind"], culprit["name"]) == ("node", truth.slow_node)
    return (culprit["kind"], culprit["name"]) == ("link", ",".join(sorted(truth.slow_link)))


def one(ranks: int, steps: int, case: str, keep: bool) -> dict:
    layout, plant = CASES[case]
    ROOT.mkdir(parents=True, exist_ok=True)
    where = Path(tempfile.mkdtemp(prefix=f"{case}-{ranks}-", dir=ROOT))
    try:
        t0 = time.perf_counter()
        truth = write_scale_run(where / "run", ranks, steps, plant, seed=7, layout=layout)
        generate_s = time.perf_counter() - t0
        out = where / "report.json"
        command = [sys.executable, "-m", "scalescope.cli", "report", str(where / "run"),
                   "--json", str(out)]  # fmt: skip
        measured = run_child(command)
        data = json.loads(out.read_text())
        return {"case": case, "ranks": ranks, "generate_s": generate_s,
                "report_s": measured.seconds, "peak_gib": measured.peak_bytes / GIB,
                "right": named_first(case, truth, data), "verdict": data["verdict"]["line"],
                "from": data["analysed_from"]}  # fmt: skip
    finally:
        if not keep:
            shutil.rmtree(where, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4096)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--full", action="store_true", help="also 65,536 ranks (the slow node)")
    p.add_argument("--keep", action="store_true", help="keep the runs under /tmp/scale-runs")
    args = p.parse_args()
    plan = [(args.ranks, c) for c in args.cases.split(",")]
    if args.full:
        plan.append((65536, "slow_node"))
    print(f"{'case':<10} {'ranks':>7} {'generate s':>11} {'report s':>9} {'peak GiB':>9}  "
          "right  verdict")  # fmt: skip
    for ranks, case in plan:
        r = one(ranks, args.steps, case, args.keep)
        print(f"{case:<10} {ranks:>7,} {r['generate_s']:>11.1f} {r['report_s']:>9.1f} "
              f"{r['peak_gib']:>9.2f}  {'yes' if r['right'] else 'NO':<5}  "
              f"{r['verdict'][:90]}")  # fmt: skip
        seconds, gib = TARGETS.get(ranks, (None, None))
        met = None if seconds is None else r["report_s"] <= seconds and r["peak_gib"] <= gib
        target = "" if seconds is None else f"<= {seconds:.0f} s, <= {gib:.0f} GiB"
        record(f"report --json from node files, {case}, {ranks:,} ranks x {args.steps:,} steps",
               r["report_s"], "s", target, met and r["right"],
               f"peak {r['peak_gib']:.2f} GiB; culprit first: {r['right']}; "
               f"generated in {r['generate_s']:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
