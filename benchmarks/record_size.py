"""Bytes per rank per step at `--record summary` against `--record full`, on real 2-rank runs.

Each layout runs once at each level through `scalescope run` (gloo, 127.0.0.1): DDP
(ddp_train.py), FSDP2 with 48 units (fsdp_train.py, a unit per layer, 15 blocks), FSDP2 x TP
on a 1x2 mesh (mesh_train.py --fsdp-tp) and a GPipe pipeline of 2 stages (pp_train.py). The
figure is the run directory's bytes (events, run.json, rank files, live states) over its
rank-steps, as issue 50 counts it; the windows are the default ones (the first 10 steps and 4
in every 100), so a short run pays its first 10 steps in full over fewer steps than a long
one. Target: summary <= 2 KB (2,048 bytes) a rank-step for every layout.

    .venv/bin/python benchmarks/record_size.py --steps 200
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from results import record

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "e2e" / "scripts"
TARGET_BYTES = 2048
RANKS = 2


@dataclass(frozen=True)
class Layout:
    name: str
    script: str
    args: tuple[str, ...]
    steps_flag: str = "--steps"


LAYOUTS = (
    Layout("DDP", "ddp_train.py", ("--width", "64")),
    Layout("FSDP2, 48 units", "fsdp_train.py", ("--units", "layer", "--depth", "15")),
    Layout("FSDP2 x TP (1x2)", "mesh_train.py", ("--loader", "--fsdp-tp")),
    Layout("pipeline (GPipe, 2 stages)", "pp_train.py", ("--schedule", "gpipe", "--warmup", "0")),
)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--only", default="", help="layouts whose name holds this (default: all)")
    return p.parse_args()


def run_bytes(layout: Layout, level: str, steps: int, tmp: Path) -> tuple[int, int]:
    """(the run directory's bytes, its rank-steps) of one run."""
    run_dir = tmp / f"{layout.script}-{level}"
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", str(RANKS), "--run-dir",
        str(run_dir), "--record", level, "--no-report", str(SCRIPTS / layout.script),
        layout.steps_flag, str(steps), *layout.args,
    ]  # fmt: skip
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"{layout.name} at {level}: {proc.stderr[-2000:]}")
    size = sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file())
    return size, RANKS * steps


def main() -> None:
    args = parse()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layout in LAYOUTS:
            if args.only and args.only not in layout.name:
                continue
            per = {}
            for level in ("full", "summary"):
                size, rank_steps = run_bytes(layout, level, args.steps, Path(tmp))
                per[level] = size / rank_steps
            rows.append((layout.name, per["full"], per["summary"]))
    print(
        f"bytes per rank per step, {RANKS} ranks x {args.steps} steps (run directory / rank-steps)"
    )
    print(f"{'layout':28} {'full':>9} {'summary':>9} {'summary/full':>13}")
    for name, full, summary in rows:
        print(f"{name:28} {full:9,.0f} {summary:9,.0f} {summary / full:13.3f}")
        record(
            f"bytes per rank-step at --record summary ({name}, {RANKS} ranks x {args.steps} steps)",
            summary, "B", f"<= {TARGET_BYTES}", summary <= TARGET_BYTES,
            f"full: {full:,.0f} B; summary/full {summary / full:.3f}",
        )  # fmt: skip


if __name__ == "__main__":
    main()
