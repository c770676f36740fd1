"""What each knob of ``scalescope tune``'s bench space does on its own: images/s of the bench
workload with one knob changed, against plain torchrun defaults (OMP_NUM_THREADS=1 with
several ranks, no binding, the workload's default options), all variants interleaved.

Every round runs every variant once, rotated and reversed every other round so no variant
always runs first; the medians, the ratio to torchrun's median and the median of the ratios
within a round (paired: robust to load that changes between rounds) are printed at the end.
Variants run through ``scalescope bench`` with its probe, as tune's trials do, except
``torchrun`` (no scalescope at all) and ``no-probe`` (scalescope's launcher, no probe).
Run by hand, not in CI:

    .venv/bin/python benchmarks/tune_knobs.py --model resnet18 --rounds 3
    .venv/bin/python benchmarks/tune_knobs.py --variant cl='--channels-last' --variant torchrun
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import record
from tune_gain import clean_env, free_port

CLI = [sys.executable, "-m", "scalescope.cli"]
VARIANTS = {
    "torchrun": None,
    "no-probe": "--no-probe",
    "scalescope": "",
    "channels_last": "--channels-last",
    "threads=2": "--threads-per-rank 2 --oversubscribe",
    "bucket=100": "--bucket-cap-mb 100",
    "bucket_view": "SCALESCOPE_DDP_GRADIENT_AS_BUCKET_VIEW=true",
    "bf16 (numerics)": "--bf16",
    "batch x2 (batch)": "--batch-size {batch2}",
}
"""name -> extra words of ``scalescope bench`` (VAR=value words set a variable); None: torchrun."""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument(
        "--variant",
        action="append",
        help="NAME (one of the built-in variants) or NAME='extra words'; default: all built-in",
    )
    return p.parse_args()


def variants(args: argparse.Namespace) -> dict[str, str | None]:
    chosen = args.variant or list(VARIANTS)
    out: dict[str, str | None] = {}
    for item in chosen:
        if item in VARIANTS:
            name, words = item, VARIANTS[item]
        else:
            name, _, words = item.partition("=")
        out[name] = None if words is None else words.format(batch2=2 * args.batch_size)
    return out


def workload_args(args: argparse.Namespace) -> list[str]:
    return [
        f"--steps={args.steps}", f"--warmup-steps={args.warmup_steps}",
        f"--batch-size={args.batch_size}", f"--image-size={args.image_size}",
    ]  # fmt: skip


def run(args: argparse.Namespace, words: str | None, run_dir: Path) -> float:
    """images/s of one run (bench.json of rank 0)."""
    if words is None:
        run_dir.mkdir(parents=True)
        env = clean_env() | {"SCALESCOPE_RUN_DIR": str(run_dir)}
        cmd = [
            sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={args.nproc}",
            f"--master-port={free_port()}", "-m", "scalescope.bench.workload", args.model,
            *workload_args(args),
        ]  # fmt: skip
    else:
        split = shlex.split(words)
        env = clean_env() | dict(w.split("=", 1) for w in split if _var(w))
        extra = [w for w in split if not _var(w)]
        cmd = [*CLI, "bench", args.model, "-n", str(args.nproc), *workload_args(args), *extra]
        cmd += ["--no-report", "--run-dir", str(run_dir)]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return float(json.loads((run_dir / "bench.json").read_text())["images_per_sec"])


def _var(word: str) -> bool:
    name, sep, _ = word.partition("=")
    return bool(sep) and name.isupper() and not name.startswith("-")


def order(names: list[str], round_: int) -> list[str]:
    shift = round_ % len(names)
    turned = names[shift:] + names[:shift]
    return turned if round_ % 2 == 0 else list(reversed(turned))


def main() -> None:
    args = parse()
    chosen = variants(args)
    results: dict[str, list[float]] = {name: [] for name in chosen}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp_name:
        for round_ in range(args.rounds):
            for name in order(list(chosen), round_):
                run_dir = Path(tmp_name) / f"{round_}-{len(results[name])}-{hash(name)}"
                value = run(args, chosen[name], run_dir)
                results[name].append(value)
                print(f"round {round_ + 1}/{args.rounds}  {name:18s} {value:8.2f} images/s",
                      flush=True)  # fmt: skip
    minutes = (time.monotonic() - started) / 60
    load = os.getloadavg()[0]
    print(f"\n{args.model}, {args.nproc} ranks on {os.cpu_count()} cpus, batch "
          f"{args.batch_size} per rank, images {args.image_size} px, {args.steps} steps "
          f"({args.warmup_steps} warm-up), {args.rounds} rounds, {minutes:.0f} min, "
          f"load average {load:.1f}")  # fmt: skip
    base = results.get("torchrun")
    print(f"{'variant':18s} {'median images/s':>16s} {'/ torchrun':>10s} {'paired':>7s}  runs")
    for name, values in results.items():
        med = statistics.median(values)
        ratio = f"{med / statistics.median(base):10.2f}" if base else f"{'':10s}"
        ratios = [v / b for v, b in zip(values, base, strict=True)] if base else []
        paired = f"{statistics.median(ratios):7.2f}" if ratios else ""
        runs = ", ".join(f"{v:.1f}" for v in values)
        print(f"{name:18s} {med:16.2f} {ratio} {paired}  {runs}")
        if ratios and name != "torchrun":
            record(
                f"images/s with {name} / torchrun defaults, paired by round ({args.model}, "
                f"{args.nproc} ranks, {args.image_size} px)", statistics.median(ratios),
                "ratio", "", None,
                f"median {med:.2f} images/s, ratio of medians {med / statistics.median(base):.2f}"
                f", {args.rounds} round(s)",
            )  # fmt: skip
    print("paired: the median over rounds of the variant's images/s / torchrun's in that round")


if __name__ == "__main__":
    main()
