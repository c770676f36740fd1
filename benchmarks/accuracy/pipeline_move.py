"""The pipeline's proposed block move against a re-run with the blocks moved, by the script's
own clock.

A two-stage ``torch.distributed.pipelining`` run of tests/e2e/scripts/pp_train.py with
unequal stages (``--split 2`` of ``--blocks 8``: stage 1 holds three times the blocks) under
``scalescope run``; its report proposes moving N blocks from the heavier stage to the other
(analyze/layouts/block_move.py ``BlockMove``, built from the measured per-block times) with a
predicted step: the schedule replayed after the move (its replay before the move is printed
with its error against the measured step, and the replay's gain beside the measured one).
The same script then runs with the blocks moved (``--split 2 + N``) under plain
torchrun, and its step by its own clock (``PP_CLOCK step_ms``) is set beside the prediction.
Interleaved: (unbalanced, moved), (moved, unbalanced), ... ``--repeats`` pairs, medians.

Target: the moved run's measured step within 15 % of the predicted step (ratio 0.85-1.15).
The unbalanced run's own clock is printed beside the probe's step too (the prediction starts
from the probe's figures).

    .venv/bin/python benchmarks/accuracy/pipeline_move.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:  # run standalone: results.py beside run_all.py
    sys.path.insert(0, str(BENCHMARKS))

from results import record  # noqa: E402

PP_TRAIN = BENCHMARKS.parent / "tests" / "e2e" / "scripts" / "pp_train.py"
STEP = re.compile(r"PP_CLOCK rank=(\d+) samples_per_s=[\d.]+ step_ms=([\d.]+)")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="interleaved pairs")
    p.add_argument("--schedule", default="1f1b", choices=("gpipe", "1f1b"))
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--split", type=int, default=2, help="blocks on stage 0 in the first run")
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--tolerance", type=float, default=0.15, help="|ratio - 1| at most this")
    return p.parse_args()


def script_args(args: argparse.Namespace, split: int) -> list[str]:
    return list(map(str, [
        PP_TRAIN, "--schedule", args.schedule, "--split", split, "--blocks", args.blocks,
        "--micro", args.micro, "--batch", args.batch, "--hidden", args.hidden,
        "--steps", args.steps, "--warmup", args.warmup,
    ]))  # fmt: skip


def own_step_ms(stdout: str) -> float:
    """The slower stage's mean step by the script's clock (both print it; they agree)."""
    steps = [float(ms) for _, ms in STEP.findall(stdout)]
    if len(steps) != 2:
        raise SystemExit(f"pp_train printed {len(steps)} PP_CLOCK lines, not 2:\n{stdout[-2000:]}")
    return max(steps)


@dataclass(frozen=True)
class Proposal:
    blocks: int
    """Blocks to move from stage 1 to stage 0 (negative: the other way)."""
    predicted_step_ms: float
    replayed_step_ms: float
    """The schedule replayed with the measured times: the step before the move."""
    probe_step_ms: float
    own_step_ms: float


def profiled(tmp: Path, args: argparse.Namespace) -> Proposal:
    run_dir = tmp / "run"
    cmd = [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", str(run_dir),
           "--warmup-steps", str(args.warmup), "--no-report",
           *script_args(args, args.split)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp, check=True, capture_output=True, text=True)
    report = tmp / "r.json"
    subprocess.run([sys.executable, "-m", "scalescope.cli", "report", str(run_dir), "--json",
                    str(report)], cwd=tmp, check=True, capture_output=True)  # fmt: skip
    pipe = json.loads(report.read_text())["pipeline"]
    move = pipe.get("move")
    if not move:
        raise SystemExit(f"no block move proposed: stage bounds {pipe['bound_stage']}")
    sign = 1 if (move["source"], move["target"]) == (1, 0) else -1
    return Proposal(sign * move["blocks"], move["predicted_step_ms"], move["replayed_step_ms"],
                    pipe["step_ms"], own_step_ms(proc.stdout))  # fmt: skip


def moved(tmp: Path, args: argparse.Namespace, blocks: int) -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--standalone",
           *script_args(args, args.split + blocks)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp, check=True, capture_output=True, text=True)
    return own_step_ms(proc.stdout)


def main() -> int:
    args = parse()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pipeline-move-") as tmp:
        blocks = None
        for i in range(args.repeats):
            folder = Path(tmp) / f"pair-{i}"
            folder.mkdir()
            first_moved = i % 2 == 1 and blocks is not None
            measured = moved(folder, args, blocks) if first_moved else None
            proposal = profiled(folder, args)
            blocks = proposal.blocks if blocks is None else blocks
            if proposal.blocks != blocks:
                print(f"pair {i + 1}: proposed {proposal.blocks} blocks, kept {blocks}")
            measured = measured if measured is not None else moved(folder, args, blocks)
            rows.append((proposal, measured))
            print(f"pair {i + 1}: unbalanced {proposal.own_step_ms:.1f} ms (own clock), "
                  f"{proposal.probe_step_ms:.1f} ms (probe); move {blocks} block(s): predicted "
                  f"{proposal.predicted_step_ms:.1f} ms, measured {measured:.1f} ms "
                  f"(ratio {measured / proposal.predicted_step_ms:.3f}); replayed before "
                  f"{proposal.replayed_step_ms:.1f} ms; gain replayed "
                  f"{proposal.replayed_step_ms - proposal.predicted_step_ms:.1f} ms, measured "
                  f"{proposal.own_step_ms - measured:.1f} ms", flush=True)  # fmt: skip
    predicted = statistics.median(p.predicted_step_ms for p, _ in rows)
    measured = statistics.median(m for _, m in rows)
    before = statistics.median(p.own_step_ms for p, _ in rows)
    ratio = statistics.median(m / p.predicted_step_ms for p, m in rows)
    low, high = 1 - args.tolerance, 1 + args.tolerance
    met = low <= ratio <= high
    print(f"medians: unbalanced {before:.1f} ms -> predicted {predicted:.1f} ms, measured "
          f"{measured:.1f} ms, ratio {ratio:.3f}  {'pass' if met else 'FAIL'}")  # fmt: skip
    record(
        "pipeline: step after the proposed block move, measured (torchrun, script's clock) / "
        f"predicted (pp_train {args.schedule}, 2 stages, split {args.split} of {args.blocks})",
        ratio, "ratio", f"{low:.2f}-{high:.2f}", met,
        f"medians {measured:.1f} / {predicted:.1f} ms (unbalanced {before:.1f} ms), "
        f"{len(rows)} interleaved pairs",
    )  # fmt: skip
    return int(not met)


if __name__ == "__main__":
    sys.exit(main())
