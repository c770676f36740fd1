"""Prove the GPU paths and the many-core paths on a lent machine: `make gpu-check`.

Sets itself up (the project's .venv, created when missing), then runs the checks of
docs/gpu.md and prints one line per check, PASS / FAIL / SKIP (why) / INFO, with its figure;
writes gpu-check.json and gpu-check.md to $OUT when it is set, else to --out. Checks that
cannot run here (no CUDA, fewer than 16 cores, out of time) say SKIP with the reason.

    python3 benchmarks/gpu_check.py                 # the full run (about 8 minutes on 1 x H100)
    python3 benchmarks/gpu_check.py --cpu-smoke     # the checks' CPU analogues, tiny sizes
    python3 benchmarks/gpu_check.py --only 1,2      # some checks
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from gpucheck.setup_env import ensure_venv  # noqa: E402  (standard library only)

if TYPE_CHECKING:
    from gpucheck.machine import Machine
    from gpucheck.plan import Plan
    from gpucheck.results import CheckResult
    from gpucheck.runner import Runner

CHECK_NUMBERS = (1, 2, 3, 4, 5, 6, 7)
DEFAULT_BUDGET_S = 510.0
"""8.5 minutes of the 9: the rest is setup and writing the files."""
LEAST_S = {1: 10, 2: 90, 3: 90, 7: 40, 4: 40, 6: 90, 5: 90}
"""Seconds a check needs at the least (a guess until the first GPU run): with less left it
says SKIP with the time left instead of starting and running out."""


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-smoke", action="store_true", help="the CPU analogues, tiny sizes")
    p.add_argument("--out", type=Path, help="where the files go when $OUT is unset "
                   "(default: the run directory)")  # fmt: skip
    p.add_argument("--work", type=Path, help="run directories and logs (default: a temp dir)")
    p.add_argument("--only", help="check numbers to run, e.g. 1,2,6 (default: all)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="overall time limit")
    p.add_argument("--wheels", type=Path, help="a directory of wheels for an offline setup")
    p.add_argument("--no-setup", action="store_true", help="run with this python as it is")
    args = p.parse_args(argv)
    try:
        args.only = only_checks(args.only)
    except ValueError as exc:
        p.error(str(exc))
    return args


def only_checks(text: str | None) -> tuple[int, ...]:
    if not text:
        return CHECK_NUMBERS
    numbers = tuple(int(w) for w in text.split(",") if w.strip())
    bad = [n for n in numbers if n not in CHECK_NUMBERS]
    if bad or not numbers:
        raise ValueError(f"--only takes check numbers among 1-7, got {text!r}")
    return numbers


def output_dir(args: argparse.Namespace, work: Path) -> Path:
    if os.environ.get("OUT"):
        return Path(os.environ["OUT"])
    return args.out or work


def run_checks(
    args: argparse.Namespace, runner: Runner, plan: Plan, machine: Machine
) -> list[CheckResult]:
    """Checks in the order 1, 2, 3, 7, 4, 6, 5: 6 needs 2's figure; 5's tune may be cut short."""
    from gpucheck.check_bench import check_bench
    from gpucheck.check_comm import check_comm
    from gpucheck.check_copies import check_copies
    from gpucheck.check_cores import check_cores
    from gpucheck.check_env import check_env
    from gpucheck.check_fsdp import check_fsdp
    from gpucheck.check_project import check_project
    from gpucheck.check_trace import check_trace
    from gpucheck.results import skip
    from gpucheck.runner import attempt

    measured: list = [None]

    def bench() -> list[CheckResult]:
        copies = check_copies(runner, plan, machine)
        results, measured[0] = check_bench(runner, plan, machine)
        return copies + results

    steps = {
        1: ("1.env", lambda: check_env(runner, plan, machine)),
        2: ("2.bench", bench),
        3: ("3.comm", lambda: check_comm(runner, plan, machine)),
        7: ("7.fsdp", lambda: check_fsdp(runner, plan, machine)),
        4: ("4.trace", lambda: check_trace(runner, plan, machine)),
        6: ("6.project", lambda: check_project(runner, plan, machine, measured[0])),
        5: ("5.cores", lambda: check_cores(runner, plan, machine)),
    }
    results = []
    for number, (name, step) in steps.items():
        if number not in args.only:
            continue
        if reason := runner.no_time(LEAST_S[number]):
            print(skip(name, reason).line(), flush=True)
            results.append(skip(name, reason))
            continue
        for result in attempt(name, step):
            print(result.line(), flush=True)
            results.append(result)
    return results


def main(argv: list[str]) -> int:
    args = parse(argv)
    if not args.no_setup:
        ensure_venv([str(Path(__file__).resolve()), *argv], args.wheels)
    from gpucheck.machine import detect
    from gpucheck.plan import FULL, SMOKE
    from gpucheck.results import FAIL, summary, write_outputs
    from gpucheck.runner import Runner

    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    plan = SMOKE if args.cpu_smoke else FULL
    runner = Runner(work, args.budget_s, plan.env)
    machine = detect()
    mode = "cpu-smoke" if args.cpu_smoke else "full"
    print(f"gpu-check ({mode}): {machine.gpu or 'no CUDA device'}, {machine.cores} cores, "
          f"torch {machine.torch}; logs in {runner.logs}", flush=True)  # fmt: skip
    results = run_checks(args, runner, plan, machine)
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for path in write_outputs(output_dir(args, work), results, machine.as_dict(), mode, date):
        print(f"wrote {path}")
    counts = summary(results)
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return 1 if counts[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
