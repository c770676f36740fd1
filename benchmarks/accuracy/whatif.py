"""The what-if's promised gain against a re-run without the cause, by the script's own clock.

Each scenario plants a cause in a real 2-rank run of tests/e2e/scripts/ddp_train.py (rank 1
sleeps ``--sleep-ms`` in forward or in data, every step or from mid-run on) and runs the same
script again without it, interleaved (planted, clean, clean, planted, ...), ``--repeats``
pairs. Per pair:

  predicted gain = the what-if's gain of ``rank:1`` on the planted run (its replay as
                   measured minus the replay with rank 1 fixed);
  measured gain  = the planted run's median step minus the clean run's, rank 0's steps by
                   the script's own clock (``--step-log``), measured steps only.

Printed side by side per pair and as medians, with the median of the pairs' ratios; target:
within 15 % of the measured gain (0.85-1.15). Not yet planted here (each says SKIP): rank-0
evaluation every k steps, a link throttled with tc between network namespaces, and two
causes at once.

    .venv/bin/python benchmarks/accuracy/whatif.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:  # run standalone: results.py beside run_all.py
    sys.path.insert(0, str(BENCHMARKS))

from results import record, skipped  # noqa: E402
from scalescope.analyze.whatif import what_if  # noqa: E402
from scalescope.events import load_run  # noqa: E402

DDP_TRAIN = BENCHMARKS.parent / "tests" / "e2e" / "scripts" / "ddp_train.py"
SCENARIOS = {
    "forward": ("forward", 0),
    "data": ("data", 0),
    "forward-midrun": ("forward", 12),
}
"""name: (where rank 1 sleeps, from which step)."""
NOT_YET = (
    "rank 0 evaluating every k steps",
    "a link throttled with tc between two network namespaces",
    "two causes at once",
)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="pairs per scenario (interleaved)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup-steps", type=int, default=4)
    p.add_argument("--sleep-ms", type=float, default=40.0)
    p.add_argument("--tolerance", type=float, default=0.15, help="|ratio - 1| at most this")
    return p.parse_args()


@dataclass(frozen=True)
class Pair:
    predicted_ms: float
    measured_ms: float
    planted_step_ms: float
    clean_step_ms: float
    predicted_step_ms: float

    @property
    def ratio(self) -> float:
        return self.predicted_ms / self.measured_ms


def run(tmp: Path, args: argparse.Namespace, where: str | None, start: int) -> Path:
    tmp.mkdir(parents=True)
    planted = [] if where is None else [
        "--sleep-rank", "1", "--sleep-s", str(args.sleep_ms / 1e3), "--sleep-where", where,
        "--sleep-from", str(start),
    ]  # fmt: skip
    cmd = [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", "run",
           "--warmup-steps", str(max(args.warmup_steps, start)), "--no-report", str(DDP_TRAIN),
           "--steps", str(args.steps), "--step-log", "steps.json", *planted]  # fmt: skip
    subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
    return tmp


def own_step_ms(folder: Path, first: int) -> float:
    steps = json.loads((folder / "steps.json").read_text())
    return 1e3 * statistics.median(steps[first:])


def measure_pair(tmp: Path, args: argparse.Namespace, name: str, i: int) -> Pair:
    where, start = SCENARIOS[name]
    first = max(args.warmup_steps, start)
    order = [where, None] if i % 2 == 0 else [None, where]
    folders = {w: run(tmp / f"{name}-{i}-{w or 'clean'}", args, w, start) for w in order}
    planted, clean = folders[where], folders[None]
    recorded = load_run(planted / "run")
    result = what_if(recorded, recorded.meta.warmup_steps, ["rank:1"])
    (fix,) = result.fixes
    planted_ms, clean_ms = own_step_ms(planted, first), own_step_ms(clean, first)
    return Pair(fix.gain_ms, planted_ms - clean_ms, planted_ms, clean_ms, fix.prediction.step_ms)


def main() -> None:
    args = parse()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    low, high = 1 - args.tolerance, 1 + args.tolerance
    target = f"{low:.2f}-{high:.2f}"
    pairs: dict[str, list[Pair]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="whatif-") as tmp:
        for i in range(args.repeats):
            for name in names:
                p = measure_pair(Path(tmp), args, name, i)
                pairs[name].append(p)
                print(f"{name} pair {i + 1}: predicted gain {p.predicted_ms:7.2f} ms, measured "
                      f"{p.measured_ms:7.2f} ms (planted {p.planted_step_ms:.2f}, clean "
                      f"{p.clean_step_ms:.2f}, predicted after {p.predicted_step_ms:.2f}), "
                      f"ratio {p.ratio:.3f}", flush=True)  # fmt: skip
    failed = 0
    print(f"\nmedians over {args.repeats} pair(s), target ratio {target}:")
    for name in names:
        ps = pairs[name]
        predicted = statistics.median(p.predicted_ms for p in ps)
        measured = statistics.median(p.measured_ms for p in ps)
        ratio = statistics.median(p.ratio for p in ps)
        met = low <= ratio <= high
        failed += not met
        print(f"{name:15s} predicted gain {predicted:7.2f} ms  measured {measured:7.2f} ms  "
              f"ratio {ratio:.3f}  {'pass' if met else 'FAIL'}")  # fmt: skip
        where, start = SCENARIOS[name]
        record(
            f"whatif: gain of fixing rank 1 sleeping {args.sleep_ms:g} ms in {where} "
            f"{'every step' if start == 0 else f'from step {start}'} (ddp_train, 2 ranks), "
            "predicted / measured by a re-run without it", ratio, "ratio", target, met,
            f"medians {predicted:.1f} / {measured:.1f} ms, {len(ps)} interleaved pairs",
        )  # fmt: skip
    for what in NOT_YET:
        print(f"SKIP {what}: not planted by this benchmark yet")
        skipped(f"whatif: gain of fixing {what}", "ratio", target, "not planted yet")
    print(f"\n{'all within' if not failed else f'{failed} scenario(s) outside'} "
          f"{100 * args.tolerance:.0f} %")  # fmt: skip


if __name__ == "__main__":
    main()
