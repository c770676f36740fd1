"""Analysis speed of a model-parallel run: load_run + analyze_run + diagnose_run of a
synthetic 3-D run (pp x dp x tp, 1F1B; synthetic_3d.py) of 1,024 ranks, beside the
data-parallel run of analyze_speed.py measured in the same session.

Goal (issue 39): the 3-D run of 1,024 ranks analysed and diagnosed within 10 s on a 2-core
machine, as the data-parallel one (1,024 ranks x 1,000 steps) is. The default 3-D run is
pp 4 x dp 32 x tp 8, 8 microbatches, 100 steps: about as many rows as the data-parallel
run's 1,000 steps (each step of a rank holds 16 phases, 32 tp all-reduces, 16-32 sends and
recvs and their waits). Each measurement is a fresh child (its peak resident set from
wait4, as analyze_speed.py's), the two runs in turn (3-D, data-parallel, 3-D, ...), so a
load on the machine falls on both alike; the figures are the medians.

    .venv/bin/python benchmarks/analyze_speed_3d.py --repeats 3
    .venv/bin/python benchmarks/analyze_speed_3d.py --pp 2 --tp 4 --keep /tmp/runs
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from analyze_speed import GIB, MIB, Measured, run_child, verdict
from results import record
from synthetic_run import write_run

GOAL_S, GOAL_BYTES = 10.0, 2 * GIB
"""Issue 39 (the time) and issue 29 (the memory) at 1,024 ranks; other sizes get them scaled
linearly with ranks."""


def goal(ranks: int) -> tuple[float, float, str]:
    """(seconds, bytes, a note when scaled)."""
    if ranks == 1024:
        return GOAL_S, GOAL_BYTES, ""
    return GOAL_S * ranks / 1024, GOAL_BYTES * ranks / 1024, " (1,024-rank goal scaled)"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100, help="steps of the 3-D run")
    p.add_argument("--ddp-steps", type=int, default=1000, help="steps of the data-parallel run")
    p.add_argument("--pp", type=int, default=4)
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--micro", type=int, default=8)
    p.add_argument("--plant", choices=("heavy_stage",), help="plant a heavy stage in the 3-D run")
    p.add_argument("--repeats", type=int, default=3, help="measurements of each run (median)")
    p.add_argument("--keep", type=Path, help="write the runs here and keep them")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(run_dir: Path) -> None:
    """In the child: time load_run, analyze_run and diagnose_run after the imports."""
    from scalescope.diagnose.engine import diagnose_run
    from scalescope.diagnose.recording import Recording
    from scalescope.events import load_run

    t0 = time.perf_counter()
    run = load_run(run_dir)
    t1 = time.perf_counter()
    analysis = Recording.of(run).analysis
    analysis.reported()  # every part the report JSON holds
    t2 = time.perf_counter()
    findings = diagnose_run(run, analysis).findings
    t3 = time.perf_counter()
    pipe = analysis.pipeline
    print(json.dumps({
        "load_s": t1 - t0, "analyze_s": t2 - t1, "diagnose_s": t3 - t2, "rows": len(run.events),
        "stages": pipe.stages if pipe else 0, "codes": sorted({f.code for f in findings}),
    }))  # fmt: skip


def measure(run_dir: Path) -> tuple[Measured, dict]:
    """One child's load + analysis + diagnosis (after its imports), its peak memory."""
    out = run_child([sys.executable, __file__, "--child", str(run_dir)])
    inside = json.loads(out.output.strip().splitlines()[-1])
    seconds = inside["load_s"] + inside["analyze_s"] + inside["diagnose_s"]
    return Measured(seconds, out.peak_bytes, out.output), inside


def medians(runs: list[tuple[Measured, dict]]) -> tuple[Measured, dict]:
    """The median total and the median of each part; the largest peak."""
    parts = {k: statistics.median(i[k] for _, i in runs) for k in ("load_s", "analyze_s",
                                                                   "diagnose_s")}  # fmt: skip
    total = statistics.median(m.seconds for m, _ in runs)
    return Measured(total, max(m.peak_bytes for m, _ in runs)), runs[-1][1] | parts


def generate(args: argparse.Namespace, where: Path) -> tuple[Path, Path]:
    three_d, ddp = where / "run-3d", where / "run-ddp"
    truth = write_run(three_d, args.ranks, args.steps, args.plant, layout="3d", pp=args.pp,
                      tp=args.tp, micro=args.micro)  # fmt: skip
    mesh = truth.mesh
    print(f"3-D run: {args.ranks:,} ranks (pp {mesh.pp} x dp {mesh.dp} x tp {mesh.tp}, "
          f"{mesh.micro} microbatches) x {args.steps} steps, {truth.rows:,} rows in "
          f"{truth.generate_s:.1f} s", flush=True)  # fmt: skip
    truth = write_run(ddp, args.ranks, args.ddp_steps)
    print(f"data-parallel run: {args.ranks:,} ranks x {args.ddp_steps} steps, {truth.rows:,} "
          f"rows in {truth.generate_s:.1f} s", flush=True)  # fmt: skip
    return three_d, ddp


def line(name: str, m: Measured, inside: dict) -> str:
    return (f"  {name:<14} {m.seconds:6.1f} s (load {inside['load_s']:.1f}, analyze "
            f"{inside['analyze_s']:.1f}, diagnose {inside['diagnose_s']:.2f}), "
            f"{m.peak_bytes / MIB:,.0f} MiB, {inside['rows']:,} rows")  # fmt: skip


def report(args: argparse.Namespace, three_d: tuple[Measured, dict], ddp: tuple[Measured, dict]):
    (m3, i3), (md, idd) = three_d, ddp
    seconds, memory, scaled = goal(args.ranks)
    print(f"medians of {args.repeats} (load_run + analyze_run + diagnose_run, after imports):")
    print(line("3-D", m3, i3) + f"  {verdict(m3.seconds, seconds)}{scaled}")
    print(line("data-parallel", md, idd))
    print(f"  3-D / data-parallel: {m3.seconds / md.seconds:.2f}x the time; findings of the "
          f"3-D run: {', '.join(i3['codes']) or 'none'}")  # fmt: skip
    size = f"{args.ranks:,} ranks x {args.steps} steps (pp {args.pp}, tp {args.tp})"
    record(f"load + analyze + diagnose of a 3-D run of {size}", m3.seconds, "s",
           f"<= {seconds:.3g} s{scaled}", m3.seconds <= seconds,
           f"{i3['rows']:,} rows, median of {args.repeats}; analyze {i3['analyze_s']:.1f} s; "
           f"data-parallel run of {args.ddp_steps} steps beside it: {md.seconds:.1f} s "
           f"({idd['rows']:,} rows)")  # fmt: skip
    record(f"peak memory of the 3-D run's analysis ({size})", m3.peak_bytes / MIB, "MiB",
           f"<= {memory / MIB:,.0f} MiB{scaled}", m3.peak_bytes <= memory,
           "the child's maximum resident set")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child is not None:
        child(args.child)
        return
    where = args.keep or Path(tempfile.mkdtemp(prefix="scalescope-3d-"))
    where.mkdir(parents=True, exist_ok=True)
    try:
        three_d, ddp = generate(args, where)
        runs: dict[str, list] = {"3d": [], "ddp": []}
        for i in range(args.repeats):
            for name, path in (("3d", three_d), ("ddp", ddp)):
                runs[name].append(measure(path))
                print(f"  round {i + 1} {name}: {runs[name][-1][0].seconds:.1f} s", flush=True)
        report(args, medians(runs["3d"]), medians(runs["ddp"]))
    finally:
        if args.keep is None:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
