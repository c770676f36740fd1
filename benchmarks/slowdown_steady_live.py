"""No slowdown alert on a steady real run: 2 ranks of tests/e2e/scripts/gpt_train.py under
``scalescope run`` for ``--minutes`` (10), rank 0 evaluating ``--eval-iters`` batches every
``--eval-every`` steps and saving a ``--checkpoint-mb`` checkpoint every
``--checkpoint-every`` steps. The step count comes from a short run before it (its mean step
by the script's clock). Counted: the alerts the live watch wrote (``alerts.jsonl``) and those
of the offline replay over the recorded run (analyze/watch/slowdown_replay.py). Target (issue 41):
0 for both.

    .venv/bin/python benchmarks/slowdown_steady_live.py --minutes 10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from results import record  # noqa: E402
from scalescope.analyze.watch.slowdown_alerts import read_alerts  # noqa: E402
from scalescope.analyze.watch.slowdown_replay import replay_run  # noqa: E402
from scalescope.events import load_run  # noqa: E402

GPT_TRAIN = BENCHMARKS.parent / "tests" / "e2e" / "scripts" / "gpt_train.py"


def run(folder: Path, steps: int, extra: list[str]) -> Path:
    folder.mkdir(parents=True)
    cmd = [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", "run",
           "--no-report", str(GPT_TRAIN), "--steps", str(steps), "--work-log",
           "work-{rank}.json", *extra]  # fmt: skip
    subprocess.run(cmd, cwd=folder, check=True, capture_output=True)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--eval-iters", type=int, default=40)
    ap.add_argument("--checkpoint-every", type=int, default=500)
    ap.add_argument("--checkpoint-mb", type=float, default=200.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="slowdown-steady-") as tmp:
        probe = run(Path(tmp) / "probe", 40, [])
        steps = json.loads((probe / "work-0.json").read_text())["steps"][5:]
        step_s = sum(s["s"] for s in steps) / len(steps)
        n = max(int(args.minutes * 60 / step_s), 100)
        print(f"step {1e3 * step_s:.1f} ms: {n:,} steps for {args.minutes:g} min", flush=True)
        extra = ["--eval-every", str(args.eval_every), "--eval-iters", str(args.eval_iters),
                 "--checkpoint-every", str(args.checkpoint_every), "--checkpoint-mb",
                 str(args.checkpoint_mb)]  # fmt: skip
        folder = run(Path(tmp) / "steady", n, extra)
        live = [a for a in read_alerts(folder / "run") if a.event == "onset"]
        replayed = [a for a in replay_run(load_run(folder / "run")) if a.event == "onset"]
    for a in live + replayed:
        print(f"  {a.message}")
    met = not live and not replayed
    print(f"steady {args.minutes:g} min: {len(live)} live alerts, {len(replayed)} replayed  "
          f"{'pass' if met else 'FAIL'}")  # fmt: skip
    record(f"slowdown: alerts on a steady {args.minutes:g}-minute run with evaluations and "
           "checkpoints (live + replayed)", len(live) + len(replayed), "alerts", "0", met,
           f"{n:,} steps of {1e3 * step_s:.1f} ms")  # fmt: skip
    return int(not met)


if __name__ == "__main__":
    sys.exit(main())
