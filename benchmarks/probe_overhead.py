"""Probe overhead: images/s of `scalescope bench` with the probe divided by images/s without.

Runs A (probe) and B (--no-probe) interleaved, A B, B A, ... on the same machine in one
invocation, and prints the median of each, their ratio, and each pair's overhead
(1 - A/B) with the one-sided 95 % upper bound of the mean overhead over the pairs (Student's
t): a shared machine's noise widens the bound, never hides a cost. Targets: ratio >= 0.99;
with at least 11 pairs, the upper bound <= 2 % (issue 50).

    .venv/bin/python benchmarks/probe_overhead.py --pairs 11
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from results import record

BOUND_TARGET_PCT = 2.0
MIN_PAIRS = 11
T95_ONE_SIDED = {
    1: 6.314,
    2: 2.920,
    3: 2.353,
    4: 2.132,
    5: 2.015,
    6: 1.943,
    7: 1.895,
    8: 1.860,
    9: 1.833,
    10: 1.812,
    11: 1.796,
    12: 1.782,
    14: 1.761,
    16: 1.746,
    20: 1.725,
}
"""Student's t, one-sided 95 %, by degrees of freedom; between them, the fewer degrees'
(a wider bound)."""


def parse(doc: str = __doc__, steps: int = 40) -> argparse.Namespace:
    """The bench workload's options, shared with top_overhead.py."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--pairs", type=int, default=5, help="A/B pairs to run (interleaved)")
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=128)
    return p.parse_args()


def bench_cmd(args: argparse.Namespace, run_dir: Path) -> list[str]:
    return [
        sys.executable, "-m", "scalescope.cli", "bench", args.model, "-n", str(args.nproc),
        "--steps", str(args.steps), "--warmup-steps", str(args.warmup_steps),
        "--batch-size", str(args.batch_size), "--image-size", str(args.image_size),
        "--run-dir", str(run_dir), "--no-report",
    ]  # fmt: skip


def images_per_sec(args: argparse.Namespace, run_dir: Path, probe: bool) -> float:
    cmd = bench_cmd(args, run_dir)
    if not probe:
        cmd.append("--no-probe")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return float(json.loads((run_dir / "bench.json").read_text())["images_per_sec"])


def main() -> None:
    args = parse()
    with_probe: list[float] = []
    without: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            for probe in order:
                value = images_per_sec(args, Path(tmp) / f"{i}-{probe}", probe)
                (with_probe if probe else without).append(value)
                label = "probe   " if probe else "no probe"
                print(f"pair {i + 1}/{args.pairs}  {label}  {value:8.1f} images/s", flush=True)
    a, b = statistics.median(with_probe), statistics.median(without)
    print(f"\n{args.model}, {args.nproc} ranks, batch {args.batch_size}/rank, {args.image_size}px")
    print(f"median images/s with probe:    {a:8.1f}")
    print(f"median images/s without probe: {b:8.1f}")
    print(f"ratio with/without: {a / b:.4f}  (target >= 0.99)")
    record(
        f"images/s with the probe / without ({args.model}, {args.nproc} ranks, "
        f"{args.image_size} px)", a / b, "ratio", ">= 0.99", a / b >= 0.99,
        f"medians {a:.1f} / {b:.1f} images/s, {args.pairs} pairs of {args.steps} steps",
    )  # fmt: skip
    overheads = [100 * (1 - x / y) for x, y in zip(with_probe, without, strict=True)]
    bound = upper_bound(overheads)
    print(f"overhead per pair: {', '.join(f'{o:+.1f}' for o in overheads)} %")
    print(f"mean overhead {statistics.fmean(overheads):+.2f} %, 95 % upper bound {bound:+.2f} %"
          f" (target <= {BOUND_TARGET_PCT} % over >= {MIN_PAIRS} pairs)")  # fmt: skip
    record(
        "probe overhead: 95 % upper bound of the mean over interleaved pairs", bound, "%",
        f"<= {BOUND_TARGET_PCT} ({MIN_PAIRS}+ pairs)",
        bound <= BOUND_TARGET_PCT and args.pairs >= MIN_PAIRS,
        f"mean {statistics.fmean(overheads):+.2f} %, {args.pairs} pairs",
    )  # fmt: skip


def upper_bound(values: list[float]) -> float:
    """The one-sided 95 % upper bound of the mean (Student's t); +inf under two values."""
    if len(values) < 2:
        return math.inf
    t = T95_ONE_SIDED[max(df for df in T95_ONE_SIDED if df <= len(values) - 1)]
    return statistics.fmean(values) + t * statistics.stdev(values) / math.sqrt(len(values))


if __name__ == "__main__":
    main()
