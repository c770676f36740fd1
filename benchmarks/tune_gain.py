"""What ``scalescope tune`` gains: samples/s of the configuration it recommends versus plain
torchrun defaults (OMP_NUM_THREADS=1 with several ranks unless the user set it, no binding,
the workload's default options), re-measured interleaved.

``--workload resnet18`` (default) tunes the bench workload (images/s from its bench.json).
The three planted workloads are user scripts in benchmarks/gain_scripts/ that carry their
own clock (rank 0 times the measured steps between two barriers, not the probe):
``comm-bound`` (a wide MLP on plain tensors, no DataLoader, batch 8 per rank),
``input-bound`` (a DataLoader with num_workers=0 and a heavy per-sample transform, opting
in through ``scalescope.tune.knobs()``) and ``oversubscribed`` (a compute-bound script run
with OMP_NUM_THREADS=8 on 2 ranks). Each is tuned over a stated space (``WORKLOADS``), then
its recommended command is re-measured against ``torchrun`` in pairs; the ratios printed are
the re-measured speedup (target >= 1.3) and tune's claimed speedup over the re-measured one
(target within 10 %).

First runs the study (``scalescope tune --bench MODEL``, with its confirmation phase: the
best is the configuration of the highest median over its search trial and ``--confirm-rounds``
re-runs, recommended only when it beats the baseline by more than the baseline's spread), then
re-measures A (torchrun defaults) and B (the confirmed best, started with the command tune
prints; when tune recommends nothing, the best by median anyway, to show what it would give)
interleaved, and prints the medians and the ratio B / A beside tune's own speedup. Run by
hand, not in CI:

    .venv/bin/python benchmarks/tune_gain.py --model resnet18 --pairs 3
    .venv/bin/python benchmarks/tune_gain.py --workload comm-bound
    .venv/bin/python benchmarks/tune_gain.py --study-json tune.json   # re-measure a saved study
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from results import record, skipped

CLI = [sys.executable, "-m", "scalescope.cli"]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=["resnet18", *WORKLOADS], default="resnet18")
    p.add_argument("--model", default="resnet18", help="the bench model of --workload resnet18")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=30, help="steps of each re-measurement")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--trials", type=int, default=12)
    p.add_argument("--trial-seconds", type=float, default=90.0)
    p.add_argument("--confirm", type=int, default=3, help="tune --confirm K")
    p.add_argument("--confirm-rounds", type=int, default=2, help="tune --confirm-rounds R")
    p.add_argument("--space", action="append", help="passed to tune (default: its own space)")
    p.add_argument("--study-json", type=Path, help="tune's --json of a study already run: no study")
    return p.parse_args()


def sizes(args: argparse.Namespace) -> list[str]:
    return [f"--batch-size={args.batch_size}", f"--image-size={args.image_size}"]


def run_study(args: argparse.Namespace, tmp: Path) -> dict:
    spaces = [w for s in args.space or [] for w in ("--space", s)]
    cmd = [
        *CLI, "tune", "--bench", args.model, "-n", str(args.nproc), *sizes(args),
        f"--trial-steps={args.steps}", f"--warmup-steps={args.warmup_steps}",
        f"--trials={args.trials}", f"--trial-seconds={args.trial_seconds}", *spaces,
        f"--confirm={args.confirm}", f"--confirm-rounds={args.confirm_rounds}",
        "--run-dir", str(tmp / "study"), "--json", str(tmp / "tune.json"),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=clean_env())
    return json.loads((tmp / "tune.json").read_text())


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def images_per_s(run_dir: Path) -> float:
    return float(json.loads((run_dir / "bench.json").read_text())["images_per_sec"])


def torchrun(args: argparse.Namespace, run_dir: Path) -> float:
    run_dir.mkdir(parents=True)
    env = clean_env() | {"SCALESCOPE_RUN_DIR": str(run_dir)}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={args.nproc}",
        f"--master-port={free_port()}", "-m", "scalescope.bench.workload", args.model,
        f"--steps={args.steps}", f"--warmup-steps={args.warmup_steps}", *sizes(args),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return images_per_s(run_dir)


def best_command(reuse: str) -> tuple[dict[str, str], list[str]]:
    """The variables and the argv of tune's ``reuse`` line (``scalescope bench ...``)."""
    words = shlex.split(reuse)
    env = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    start = words.index("scalescope")
    return env, [*CLI, *words[start + 1 :]]


def tuned(args: argparse.Namespace, reuse: str, run_dir: Path) -> float:
    env, cmd = best_command(reuse)
    cmd += [f"--steps={args.steps}", f"--warmup-steps={args.warmup_steps}", *sizes(args)]
    cmd += ["--no-report", "--run-dir", str(run_dir)]
    subprocess.run(cmd, check=True, env=clean_env() | env, stdout=subprocess.DEVNULL)
    return images_per_s(run_dir)


def best_reuse(args: argparse.Namespace, study: dict) -> str:
    """The command of the best configuration by median, built as tune builds its reuse line
    (tune prints none when the gain is within the baseline's spread)."""
    from scalescope.bench.options import BenchOptions
    from scalescope.launch.process.local import LaunchOptions
    from scalescope.launch.run.runner import RunSpec
    from scalescope.tune.apply import TuneTarget, reuse_command
    from scalescope.tune.space import SpaceContext, format_value, parse_space

    best = next(t for t in study["trials"] if t["number"] == study["best_trial"])
    items = [f"{k}={','.join(format_value(v) for v in vs)}" for k, vs in study["space"].items()]
    space = parse_space(items, SpaceContext(args.nproc, os.cpu_count() or 1, args.batch_size))
    launch = LaunchOptions(nproc_per_node=args.nproc)
    spec = RunSpec(target="scalescope.bench.workload", is_module=True, launch=launch)
    bench = BenchOptions(model=args.model, batch_size=args.batch_size, image_size=args.image_size)
    return reuse_command(TuneTarget(spec, bench), space, best["config"])


def main() -> None:
    args = parse()
    if args.workload != "resnet18":
        script_main(args)
        return
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        study = json.loads(args.study_json.read_text()) if args.study_json else run_study(args, tmp)
        reuse = study["reuse"]
        if reuse:
            print(f"\nconfirmed best configuration: {reuse}", flush=True)
        else:
            reuse = best_reuse(args, study)
            print("\ntune: no significant gain over the baseline (keep the configuration "
                  f"as given); re-measuring its best by median anyway: {reuse}",
                  flush=True)  # fmt: skip
        results = measure_pairs(args, reuse, tmp)
    a, b = statistics.median(results["torchrun"]), statistics.median(results["tuned"])
    pairs = zip(results["torchrun"], results["tuned"], strict=True)
    ratios = ", ".join(f"{t / r:.2f}" for r, t in pairs)
    trials = len(study["trials"])
    load = os.getloadavg()[0]
    print(f"\n{args.model}, {args.nproc} ranks on {os.cpu_count()} cpus, batch "
          f"{args.batch_size}, images {args.image_size}px, {trials} trials, load average "
          f"{load:.1f}")  # fmt: skip
    print(f"median images/s, torchrun defaults:      {a:8.2f}")
    print(f"median images/s, best tune configuration: {b:8.2f}")
    print(f"ratio tuned / torchrun: {b / a:.3f} (pairs {ratios})")
    print(f"tune's speedup of that configuration over its baseline: {confirmed_speedup(study)}")
    record(
        f"images/s, tune's best configuration / torchrun defaults ({args.model}, "
        f"{args.nproc} ranks, {args.image_size} px)", b / a, "ratio", ">= 1.3", b / a >= 1.3,
        f"pairs {ratios}; {trials} trials; tune's own speedup {confirmed_speedup(study)}",
    )  # fmt: skip


def measure_pairs(args: argparse.Namespace, reuse: str, tmp: Path) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"torchrun": [], "tuned": []}
    for i in range(args.pairs):
        order = ("torchrun", "tuned") if i % 2 == 0 else ("tuned", "torchrun")
        for name in order:
            run_dir = tmp / f"{i}-{name}"
            value = torchrun(args, run_dir) if name == "torchrun" else tuned(args, reuse, run_dir)
            results[name].append(value)
            print(f"pair {i + 1}/{args.pairs}  {name:8s} {value:8.2f} images/s", flush=True)
    return results


def confirmed_speedup(study: dict) -> str:
    """The best trial's median over the baseline's, its number of runs, and the verdict."""
    trial = next(t for t in study["trials"] if t["number"] == study["best_trial"])
    verdict = "recommended" if study["recommended_trial"] is not None else "not significant"
    spread = study["baseline_spread"]
    speedup = f"{trial['speedup']:.3f}" if trial["speedup"] else "-"
    return (f"{speedup} (median of {len(trial['measurements'])} runs; baseline spread "
            f"{spread:.1f} {trial['unit']}: {verdict})")  # fmt: skip


SCRIPTS = Path(__file__).parent / "gain_scripts"


@dataclass(frozen=True)
class Workload:
    script: str
    args: tuple[str, ...]
    """The script's arguments in the study and in every re-measured run."""
    space: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    """Variables of the user's shell (the planted mistake), for tune and torchrun alike."""
    launch: tuple[str, ...] = ()
    """Launcher options given to tune (and kept in the re-measured command)."""


WORKLOADS = {
    "comm-bound": Workload(
        "comm_bound.py", ("--steps=30", "--warmup-steps=5"),
        ("nproc_per_node=1,2", "threads_per_rank=1,2"),
    ),
    "input-bound": Workload(
        "input_bound.py", ("--steps=30", "--warmup-steps=5"), ("workers=0,1,2,4",),
    ),
    "oversubscribed": Workload(
        "compute_bound.py", ("--steps=150", "--warmup-steps=10"), ("threads_per_rank=1,2,8",),
        env=(("OMP_NUM_THREADS", "8"),), launch=("--no-bind",),
    ),
}  # fmt: skip


def script_study(args: argparse.Namespace, w: Workload, tmp: Path) -> dict:
    spaces = [word for item in args.space or w.space for word in ("--space", item)]
    cmd = [
        *CLI, "tune", "-n", str(args.nproc), *w.launch, *spaces, f"--trials={args.trials}",
        f"--trial-seconds={args.trial_seconds}", f"--confirm={args.confirm}",
        f"--confirm-rounds={args.confirm_rounds}", "--warmup-steps=3",
        "--run-dir", str(tmp / "study"), "--json", str(tmp / "tune.json"),
        str(SCRIPTS / w.script), *w.args,
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=clean_env() | dict(w.env))
    return json.loads((tmp / "tune.json").read_text())


def own_clock(out: Path) -> float:
    return float(json.loads(out.read_text())["samples_per_s"])


def script_torchrun(args: argparse.Namespace, w: Workload, out: Path) -> float:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={args.nproc}",
        f"--master-port={free_port()}", str(SCRIPTS / w.script), *w.args, f"--out={out}",
    ]  # fmt: skip
    env = clean_env() | dict(w.env)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return own_clock(out)


def script_tuned(w: Workload, reuse: str, run_dir: Path, out: Path) -> float:
    """The reuse line as tune printed it (``scalescope run ... SCRIPT ARGS``), with the
    launcher options given to tune that are not knobs, and the script's clock file."""
    env, cmd = best_command(reuse)
    at = cmd.index("run") + 1
    cmd[at:at] = ["--no-report", "--run-dir", str(run_dir), *w.launch]
    cmd.append(f"--out={out}")
    full = clean_env() | dict(w.env) | env
    subprocess.run(cmd, check=True, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return own_clock(out)


def script_main(args: argparse.Namespace) -> None:
    w = WORKLOADS[args.workload]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        study = script_study(args, w, tmp)
        trial = claimed_trial(study)
        if trial is None:
            print("\ntune measured nothing to re-measure", flush=True)
            skipped(f"{args.workload}: samples/s by the script's clock, tune's command / "
                    "torchrun defaults", "ratio", ">= 1.3",
                    "tune measured nothing to re-measure")  # fmt: skip
            return
        reuse = study["reuse"] or script_reuse(args, w, study, trial)
        print(f"\nre-measuring: {reuse}", flush=True)
        results: dict[str, list[float]] = {"torchrun": [], "tuned": []}
        for i in range(args.pairs):
            order = ("torchrun", "tuned") if i % 2 == 0 else ("tuned", "torchrun")
            for name in order:
                out = tmp / f"{i}-{name}.json"
                value = (
                    script_torchrun(args, w, out)
                    if name == "torchrun"
                    else script_tuned(w, reuse, tmp / f"{i}-run", out)
                )
                results[name].append(value)
                print(f"pair {i + 1}/{args.pairs}  {name:8s} {value:9.2f} samples/s", flush=True)
    print_verdict(args, study, trial, results)


def claimed_trial(study: dict) -> dict | None:
    """The recommended trial, else the best (confirmed) one, else the highest median."""
    for key in ("recommended_trial", "best_trial"):
        if study.get(key) is not None:
            return next(t for t in study["trials"] if t["number"] == study[key])
    measured = [t for t in study["trials"] if t["median"]]
    return max(measured, key=lambda t: t["median"], default=None)


def script_reuse(args: argparse.Namespace, w: Workload, study: dict, trial: dict) -> str:
    """tune's reuse line for ``trial`` when tune recommended nothing (to show what it gives)."""
    from scalescope.launch.process.local import LaunchOptions
    from scalescope.launch.run.runner import RunSpec
    from scalescope.tune.apply import TuneTarget, reuse_command
    from scalescope.tune.space import SpaceContext, parse_space

    space = parse_space(list(args.space or w.space), SpaceContext(args.nproc, os.cpu_count() or 1))
    spec = RunSpec(target=str(SCRIPTS / w.script), args=list(w.args),
                   launch=LaunchOptions(nproc_per_node=args.nproc))  # fmt: skip
    return reuse_command(TuneTarget(spec), space, trial["config"])


def print_verdict(args: argparse.Namespace, study: dict, trial: dict, results: dict) -> None:
    a, b = statistics.median(results["torchrun"]), statistics.median(results["tuned"])
    pairs = ", ".join(
        f"{t / r:.2f}" for r, t in zip(results["torchrun"], results["tuned"], strict=True)
    )
    measured = b / a
    claimed = trial["speedup"]
    verdict = "recommended" if study["recommended_trial"] is not None else "NOT recommended"
    print(f"\n{args.workload}: {args.nproc} ranks on {os.cpu_count()} cpus, "
          f"{len(study['trials'])} trials, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"tune: trial {trial['number']} {trial['config']} ({verdict}, "
          f"{len(trial['measurements'])} measurements, unit {study['unit']}; "
          f"notes: {'; '.join(trial['changes']) or '-'})")  # fmt: skip
    print(f"median samples/s (script's clock), torchrun defaults: {a:9.2f}")
    print(f"median samples/s (script's clock), tune's command:    {b:9.2f}")
    print(f"re-measured speedup: {measured:.3f} (pairs {pairs}; target >= 1.3: "
          f"{'met' if measured >= 1.3 else 'MISSED'})")  # fmt: skip
    if claimed:
        ratio = claimed / measured
        print(f"tune's claimed speedup: {claimed:.3f}; claimed / re-measured = {ratio:.3f} "
              f"(target within 10 %: {'met' if abs(ratio - 1) <= 0.10 else 'MISSED'})")  # fmt: skip
    record_verdict(args, trial, verdict, measured, pairs)


def record_verdict(
    args: argparse.Namespace, trial: dict, verdict: str, measured: float, pairs: str
) -> None:
    record(
        f"{args.workload}: samples/s by the script's clock, tune's command / torchrun defaults",
        measured, "ratio", ">= 1.3", measured >= 1.3,
        f"trial {trial['number']} {trial['config']} ({verdict}); pairs {pairs}",
    )  # fmt: skip
    claimed = trial["speedup"]
    if claimed:
        ratio = claimed / measured
        record(
            f"{args.workload}: tune's claimed speedup / re-measured speedup", ratio, "ratio",
            "within 10 % of 1", abs(ratio - 1) <= 0.10, f"claimed {claimed:.3f}",
        )  # fmt: skip


if __name__ == "__main__":
    main()
