"""Threads and binding: images/s of the resnet50 bench started by torchrun with its default
thread setting (OMP_NUM_THREADS=1 with several ranks, no binding) versus scalescope's default
(ranks bound to disjoint cores, threads = the cores of each rank's share).

Runs A (torchrun) and B (scalescope) interleaved, both without the probe, and prints the
medians and the ratio B / A.

    .venv/bin/python benchmarks/threads_mapping.py --pairs 3
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from results import record


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=128)
    return p.parse_args()


def workload_args(args: argparse.Namespace) -> list[str]:
    return [
        args.model, f"--steps={args.steps}", f"--warmup-steps={args.warmup_steps}",
        f"--batch-size={args.batch_size}", f"--image-size={args.image_size}",
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args: argparse.Namespace, run_dir: Path) -> float:
    run_dir.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["SCALESCOPE_RUN_DIR"] = str(run_dir)
    cmd = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={args.nproc}",
        f"--master-port={free_port()}", "-m", "scalescope.bench.workload", *workload_args(args),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return float(json.loads((run_dir / "bench.json").read_text())["images_per_sec"])


def scalescope(args: argparse.Namespace, run_dir: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    cmd = [
        sys.executable, "-m", "scalescope.cli", "bench", *workload_args(args)[:1],
        "-n", str(args.nproc), *workload_args(args)[1:], "--no-probe", "--no-report",
        "--run-dir", str(run_dir),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return float(json.loads((run_dir / "bench.json").read_text())["images_per_sec"])


def main() -> None:
    args = parse()
    results: dict[str, list[float]] = {"torchrun": [], "scalescope": []}
    runners = {"torchrun": torchrun, "scalescope": scalescope}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = ("torchrun", "scalescope") if i % 2 == 0 else ("scalescope", "torchrun")
            for name in order:
                value = runners[name](args, Path(tmp) / f"{i}-{name}")
                results[name].append(value)
                print(f"pair {i + 1}/{args.pairs}  {name:10s} {value:8.2f} images/s", flush=True)
    a, b = statistics.median(results["torchrun"]), statistics.median(results["scalescope"])
    print(f"\n{args.model}, {args.nproc} ranks on {os.cpu_count()} cpus, batch {args.batch_size}")
    print(f"median images/s, torchrun default threads:  {a:8.2f}")
    print(f"median images/s, scalescope default:        {b:8.2f}")
    print(f"ratio scalescope / torchrun: {b / a:.3f}")
    record(
        f"images/s, scalescope's default placement / torchrun's default ({args.model}, "
        f"{args.nproc} ranks)", b / a, "ratio", "", None,
        f"medians {b:.2f} / {a:.2f} images/s, {args.pairs} pairs of {args.steps} steps",
    )  # fmt: skip


if __name__ == "__main__":
    main()
