"""Wall time of `scalescope suite --quick` (all six workloads, 2 ranks) against its CI budget.

Runs the CLI as CI does, `--repeats` times, and prints each wall time, the median and the
median / budget ratio, with the CPU time the suite and its ranks used (what an idle
machine's wall time cannot go below, divided by the cores). Target: ratio < 1 (180 s on 2
cores).

    .venv/bin/python benchmarks/suite_quick.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import record

BUDGET_S = 180.0


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=1)
    return p.parse_args()


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(workdir: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `suite --quick`."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    cpu = children_cpu_s()
    begin = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "scalescope.cli", "suite", "--quick", "--suite-dir", "s"],
        cwd=workdir, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return time.monotonic() - begin, children_cpu_s() - cpu


def main() -> None:
    args = parse()
    walls = []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu = run_once(Path(tmp))
        walls.append(wall)
        print(f"run {i + 1}: wall {wall:.1f} s, cpu {cpu:.1f} s ({os.cpu_count()} cpus)")
    median = statistics.median(walls)
    print(f"median wall {median:.1f} s; budget {BUDGET_S:.0f} s; ratio {median / BUDGET_S:.2f}")
    record(
        "wall time of `suite --quick` (6 workloads, 2 ranks)", median, "s",
        f"< {BUDGET_S:.0f} s", median < BUDGET_S,
        f"median of {args.repeats}; ratio to the CI budget {median / BUDGET_S:.2f}",
    )  # fmt: skip


if __name__ == "__main__":
    main()
