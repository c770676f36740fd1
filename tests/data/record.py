"""Record the real runs under tests/data/runs/ again, or their reports, and print what changed.

    .venv/bin/python tests/data/record.py                 # every scenario, live (~8 min)
    .venv/bin/python tests/data/record.py straggler_data_2 hang_host
    .venv/bin/python tests/data/record.py --reports-only  # keep the runs, write their reports

Run it on an idle machine: the truth of each scenario (``scenario.json``) is measured beside
the run (the workload's own clock, a reference run, the sleeps' real durations), and a run
that other processes slowed is recorded again (``real_runs.ExternalLoad``). Re-record when
the event schema changes; write the reports again (``--reports-only``) when a change to the
analysis, the diagnosis or the report is meant to change what they say: the diff printed for
each scenario is that change, to read before committing it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "helpers"), str(TESTS / "e2e")]

import heavy_stage as P2P  # noqa: E402
import psutil  # noqa: E402
import slow_link_job  # noqa: E402
from real_runs import (  # noqa: E402
    ATTEMPTS,
    BUSY_LOOP,
    CLI,
    COMM_BENCH,
    MAX_EXTERNAL_PCT,
    RATE,
    RESNET18_ARGS,
    ExternalLoad,
    bench_in_both,
    noise_images,
    throttle,
)
from real_runs import bench_step_ms as bench_ms  # noqa: E402
from recorded_runs import (  # noqa: E402
    RUNS,
    RUNS_TOKEN,
    Scenario,
    load_scenario,
    recorded_report,
    report_of,
    save_scenario,
    store_report,
)
from stragglers import DELAY_S, FROM, STEPS, WHERE, truth_ms  # noqa: E402

from conftest import cli_env, veth_hosts  # noqa: E402

SCRIPTS = TESTS / "e2e" / "scripts"
TRACES = TESTS / "data" / "traces"


def cli(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *map(str, args)], cwd=cwd, env=cli_env(), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def quiet(record: Callable[[], dict], what: str) -> dict:
    """``record()`` again while other processes used more than ``MAX_EXTERNAL_PCT`` of the
    cpus (its truth is then not the run's own); the last attempt is kept, its load noted."""
    for attempt in range(ATTEMPTS):
        with ExternalLoad() as load:
            truth = record()
        truth["external_load_pct"] = round(load.pct, 1)
        if load.pct <= MAX_EXTERNAL_PCT:
            return truth
        print(f"  {what}: other processes used {load.pct:.0f}% of the cpus (attempt {attempt + 1})")
    return truth


def fresh(folder: Path) -> Path:
    run_dir = folder / "run"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return run_dir


def checked(proc: subprocess.CompletedProcess, codes: tuple[int, ...] = (0,)) -> None:
    if proc.returncode not in codes:
        raise SystemExit(f"exit {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def bench(args: list[str], run_dir: Path, busy_cpu: int | None = None) -> float:
    """A bench run (optionally beside a busy loop on one cpu); its mean step, ms."""
    shutil.rmtree(run_dir, ignore_errors=True)
    busy = None
    if busy_cpu is not None:
        busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(busy_cpu), "240"])
    try:
        checked(cli([*args, "--run-dir", run_dir, "--no-report"], run_dir.parent))
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    return bench_ms(run_dir)


# --- the scenarios: each records into its folder and returns its truth ---------------------


def balanced(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    truth = quiet(lambda: {"step_ms": round(bench(RESNET18_ARGS, run_dir), 1)}, "balanced")
    about = "resnet18, 2 ranks on a core each, one thread each: no bottleneck to name"
    return Scenario(folder.name, about, RESNET18_ARGS, truth)


def input_bound(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    images = noise_images(Path(f"/tmp/scalescope-record-{os.getpid()}"), 64, 1024, 768)
    args = ["bench", "resnet18", "-n", "2", "--data", str(images), "--workers", "0",
            "--image-size", "64", "--batch-size", "8", "--steps", "8",
            "--warmup-steps", "2"]  # fmt: skip

    def record() -> dict:
        step = bench(args, run_dir)
        wait = step - bench_ms(run_dir, "compute_times_s")
        return {"share_pct": round(100 * wait / step, 1), "wait_ms": round(wait, 1)}

    truth = quiet(record, "input_bound")
    truth["about"] = "the wait for the next batch by the workload's own clock (bench.json)"
    shutil.rmtree(images, ignore_errors=True)
    about = "resnet18 reading 1024x768 JPEGs of noise with no DataLoader workers"
    return Scenario(folder.name, about, args, truth)


def oversubscribed(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = [*RESNET18_ARGS, "--no-bind", "--oversubscribe", "--threads-per-rank", "2"]
    reference = load_scenario("balanced").truth["step_ms"]

    def record() -> dict:
        step = bench(args, run_dir)
        return {"share_pct": round(100 * (step - reference) / step, 1), "step_ms": round(step, 1),
                "reference_step_ms": reference}  # fmt: skip

    truth = quiet(record, "oversubscribed")
    truth["about"] = "step time lost against the balanced scenario's run"
    about = "2 ranks of 2 threads each on 2 cores, unbound; reported with --baseline balanced"
    return Scenario(folder.name, about, args, truth, ["--baseline", f"{RUNS_TOKEN}/balanced/run"])


def straggler_shared_core(folder: Path) -> Scenario:
    run_dir = fresh(folder)

    def record() -> dict:
        step = bench(RESNET18_ARGS, run_dir, busy_cpu=1)
        reference = bench(RESNET18_ARGS, folder / "reference")
        shutil.rmtree(folder / "reference")
        return {"share_pct": round(100 * (step - reference) / step, 1), "step_ms": round(step, 1),
                "reference_step_ms": round(reference, 1)}  # fmt: skip

    truth = quiet(record, "straggler_shared_core")
    truth["about"] = "step time lost against the same run recorded right after, without the loop"
    about = "the balanced workload with a busy loop on rank 1's core"
    return Scenario(folder.name, about, RESNET18_ARGS, truth)


def compute_resnet50(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = ["bench", "resnet50", "-n", "1", "--batch-size", "16", "--image-size", "96",
            "--steps", "6", "--warmup-steps", "2"]  # fmt: skip

    def record() -> dict:
        step = bench(args, run_dir)
        compute = bench_ms(run_dir, "compute_times_s")
        return {"share_pct": round(min(100.0, 100 * compute / step), 1)}

    truth = quiet(record, "compute_resnet50")
    truth["about"] = "forward + backward + optimizer by the workload's own clock (bench.json)"
    return Scenario(folder.name, "resnet50 on one rank: compute-bound", args, truth)


def comm_bound(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    with veth_hosts("10.211.9", "rc") as hosts:
        fast = bench_in_both(hosts, folder / "fast")
        shutil.rmtree(folder / "fast")
        reason = throttle(hosts)
        if reason:
            raise SystemExit(reason)
        step = bench_in_both(hosts, run_dir)
    truth = {"share_pct": round(100 * (step - fast) / step, 1), "step_ms": round(step, 1),
             "unthrottled_step_ms": round(fast, 1),
             "about": f"step time lost at {RATE} against the same link unthrottled"}  # fmt: skip
    about = f"{COMM_BENCH[1]}, one rank in each of two network namespaces joined at {RATE}"
    return Scenario(folder.name, about, [*COMM_BENCH, "--nnodes", "2"], truth)


def straggler(where: str, ranks: int, spin: bool = False) -> Callable[[Path], Scenario]:
    """Rank 1 sleeps ``DELAY_S`` a step ``where`` (``spin``: computes as long instead)."""

    def record_it(folder: Path) -> Scenario:
        run_dir = fresh(folder)
        shared = ["--oversubscribe"] if ranks > 2 else []
        args = ["run", "-n", str(ranks), *shared, "--warmup-steps", str(FROM),
                str(SCRIPTS / "ddp_train.py"), "--steps", str(STEPS),
                "--sleep-rank", "1", "--sleep-s", str(DELAY_S), "--sleep-where", where,
                "--sleep-from", str(FROM), *(["--spin"] if spin else [])]  # fmt: skip

        def record() -> dict:
            shutil.rmtree(run_dir, ignore_errors=True)
            logs = ["--sleep-log", folder / "slept.json", "--step-log", folder / "steps.json"]
            checked(cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:], *logs],
                        folder))  # fmt: skip
            return _straggler_truth(folder)

        truth = quiet(record, folder.name)
        options = ["-t", f"max_threads_per_core={ranks / 2}"] if shared else []
        how = "computes (a busy loop)" if spin else "sleeps"
        about = f"{ranks} ranks of a DDP MLP; rank 1 {how} 70 ms per step {where}"
        return Scenario(folder.name, about, args, truth, options)

    return record_it


def _straggler_truth(folder: Path) -> dict:
    slept, step, reference = truth_ms(folder)
    (folder / "slept.json").unlink()
    (folder / "steps.json").unlink()
    return {
        "share_pct": round(100 * (step - reference) / step, 1),
        "sleep_share_pct": round(100 * slept / step, 1),
        "slept_ms": round(slept, 1),
        "step_ms": round(step, 1),
        "reference_step_ms": round(reference, 1),
        "about": "rank 0's step time lost against its steps before the sleeps (medians)",
    }


def hang(mode: str) -> Callable[[Path], Scenario]:
    def record_it(folder: Path) -> Scenario:
        run_dir = fresh(folder)
        args = ["run", "-n", "2", "--hang-after", "3", "--hang-action", "kill",
                str(SCRIPTS / "hang_train.py"), "--mode", mode, "--at", "6"]  # fmt: skip
        proc = cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:]], folder)
        if not (run_dir / "hang.json").is_file():
            raise SystemExit(f"no hang.json (exit {proc.returncode}): {proc.stderr[-2000:]}")
        late = "sleeps in host work" if mode == "host" else "calls broadcast"
        about = f"rank 1 {late} before its 7th step while rank 0 calls all_reduce"
        truth = {"late_rank": 1, "at_step": 6, "about": about}
        return Scenario(folder.name, f"a 2-rank hang: {mode}", args, truth)

    return record_it


def _start(args: list[str], folder: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *map(str, args)], cwd=folder, env=cli_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip


def _wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never appeared")
        time.sleep(0.1)


def replicas(folder: Path) -> Scenario:
    from scalescope.events.live_state import read_live_states

    run_dir = fresh(folder)
    args = ["run", "-n", "2", str(SCRIPTS / "replicas_train.py"), "-a", "resnet18", "-b", "4",
            "--dummy", "-j", "1", "--image-size", "32"]  # fmt: skip
    proc = _start([*args[:1], "--run-dir", run_dir, *args[1:]], folder)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        states = read_live_states(run_dir, 2)
        if len(states) == 2 and all(s.steps_done >= 8 for s in states.values()):
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=120)
    truth = {"about": "imagenet/main.py's structure: a process group, no DDP; stopped by Ctrl-C"}
    return Scenario(folder.name, "independent replicas, stopped by Ctrl-C", args, truth)


def failed_rank(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = ["run", "-n", "2", str(SCRIPTS / "ddp_train.py"), "--fail-rank", "1",
            "--fail-step", "3"]  # fmt: skip
    checked(cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:]], folder), (1,))
    truth = {"failed_rank": 1, "steps_done": 3, "about": "rank 1 raises at step 3"}
    return Scenario(folder.name, "a rank raises", args, truth)


def killed_rank(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    ready = folder / "ready"
    args = ["run", "-n", "2", str(SCRIPTS / "ddp_train.py"), "--steps", "5000",
            "--sleep-rank", "1", "--sleep-s", "0.02"]  # fmt: skip
    proc = _start([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:],
                   "--ready-file", ready], folder)  # fmt: skip
    _wait_for(ready)
    time.sleep(2.0)
    rank1 = [p for p in psutil.Process(proc.pid).children(recursive=True)
             if p.environ().get("RANK") == "1"]  # fmt: skip
    os.kill(rank1[0].pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    ready.unlink()
    truth = {"killed_rank": 1, "signal": "SIGKILL", "about": "rank 1 killed 2 s into the run"}
    return Scenario(folder.name, "a rank killed by SIGKILL mid-run", args, truth)


def profiled(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = ["run", "-n", "2", str(SCRIPTS / "ddp_profiled.py"), "--trace-dir",
            str(folder / "traces"), "--steps", "8", "--wait", "1", "--warmup", "1", "--active",
            "4"]  # fmt: skip

    def record() -> dict:
        for path in (run_dir, folder / "traces"):
            shutil.rmtree(path, ignore_errors=True)
        checked(cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:]], folder))
        return {"profiled_steps": [2, 3, 4, 5], "about": "torch.profiler traces of the same run"}

    truth = quiet(record, "profiled")
    about = "a 2-rank DDP run recorded by the probe and by torch.profiler (traces/)"
    return Scenario(folder.name, about, args, truth)


def fsdp(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = ["run", "-n", "2", str(SCRIPTS / "fsdp_train.py"), "--trace-dir",
            str(folder / "traces"), "--steps", "6", "--wait", "1", "--warmup", "1", "--active",
            "3", "--dtensor"]  # fmt: skip

    def record() -> dict:
        for path in (run_dir, folder / "traces"):
            shutil.rmtree(path, ignore_errors=True)
        checked(cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:]], folder))
        return {"profiled_steps": [2, 3, 4], "about": "torch.profiler traces of the same run"}

    truth = quiet(record, "fsdp")
    about = (
        "a 2-rank FSDP2 run (fully_shard on 3 blocks and the root) recorded by the probe and "
        "by torch.profiler (traces/), then a DTensor redistribution and a functional all-reduce"
    )
    return Scenario(folder.name, about, args, truth)


def p2p_pipeline(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = ["run", "-n", P2P.STAGES, "--oversubscribe", "--warmup-steps", P2P.WARMUP,
            SCRIPTS / "p2p_pipeline.py", "--steps", P2P.STEPS, "--micro", P2P.MICRO,
            "--batch", P2P.BATCH, "--hidden", P2P.HIDDEN, "--sleep-ms", P2P.SLEEP_MS]  # fmt: skip
    args = list(map(str, args))

    def record() -> dict:
        shutil.rmtree(run_dir, ignore_errors=True)
        checked(cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:]], folder))
        about = f"stage {P2P.STAGES - 1} sleeps {P2P.SLEEP_MS} ms in each microbatch's forward"
        return {"heavy_stage": P2P.STAGES - 1, "about": about}

    truth = quiet(record, "p2p_pipeline")
    about = "a hand-written 3-stage GPipe pipeline over send/recv whose last stage is heavy"
    return Scenario(folder.name, about, args, truth)


def fsdp_tp(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = ["run", "-n", "4", "--oversubscribe", str(SCRIPTS / "sp_train.py"), "--steps", "3"]

    def record() -> dict:
        shutil.rmtree(run_dir, ignore_errors=True)
        checked(cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:]], folder))
        return {"mesh": {"dp": 2, "tp": 2}, "activation_bytes": SP_ACTIVATION_BYTES,
                "about": "tp pairs (0, 1), (2, 3); dp pairs (0, 2), (1, 3)"}  # fmt: skip

    truth = quiet(record, "fsdp_tp")
    about = (
        "DTensor tensor and sequence parallelism under FSDP2 on a dp 2 x tp 2 mesh of 4 ranks "
        "(sp_train.py, torchtitan's layout small)"
    )
    return Scenario(folder.name, about, args, truth)


SP_ACTIVATION_BYTES = 4 * 16 * 32 * 4
"""sp_train.py's activations, (BATCH, SEQ, WIDTH) float32: a tp reduce-scatter's input."""


def slowdown_rank(folder: Path) -> Scenario:
    run_dir = fresh(folder)
    args = ["run", "-n", "4", "--oversubscribe", str(SCRIPTS / "ddp_train.py"), "--steps", "330",
            "--sleep-rank", "2", "--sleep-s", "0.03", "--sleep-where", "forward",
            "--sleep-from", "220"]  # fmt: skip

    def record() -> dict:
        shutil.rmtree(run_dir, ignore_errors=True)
        checked(cli([*args[:1], "--run-dir", run_dir, "--no-report", *args[1:]], folder))
        return {"slow_rank": 2, "phase": "forward", "from_step": 220,
                "about": "rank 2 sleeps 30 ms in each forward from step 220 on"}  # fmt: skip

    truth = quiet(record, "slowdown_rank")
    about = "4 DDP ranks; rank 2 slows down in forward mid-run (the slowdown watch's alerts)"
    return Scenario(folder.name, about, args, truth)


def slowdown_link(folder: Path) -> Scenario:
    """Recorded where network namespaces can be made (root, iproute2, tc): see
    tests/helpers/slow_link_job.py."""
    fresh(folder)
    args = ["run", "--nnodes", str(slow_link_job.HOSTS), "-n", "1", "(one per host)",
            str(slow_link_job.SCRIPT), *slow_link_job.ARGS]  # fmt: skip

    def record() -> dict:
        shutil.rmtree(folder / "run", ignore_errors=True)
        outcome = slow_link_job.run_slowed_link(folder)
        if isinstance(outcome, str):
            raise SystemExit(f"slowdown_link cannot be recorded here: {outcome}")
        (folder / "hosts").unlink(missing_ok=True)
        return {"link": ["host0", "host1"], "rate": slow_link_job.RATE,
                "throttled_after_s": slow_link_job.THROTTLE_AFTER_S,
                "about": "the path between host0 and host1 throttled mid-run"}  # fmt: skip

    truth = quiet(record, "slowdown_link")
    about = "3 hosts (network namespaces) in a ring of pipeline pairs; one link slows mid-run"
    return Scenario(folder.name, about, args, truth)


PROFILER_EXIT_ABORT = "terminate called without an active exception"
"""torch.profiler (Kineto) of a CUDA build on a machine with no GPU sometimes aborts a rank
as it exits, after profiler_stop: such a run is made again."""


def kineto_traces() -> None:
    """torch.profiler traces of two 2-rank gloo runs under torchrun, no scalescope: DDP
    training, and one call of every op (tests/unit/ingest/test_kineto.py)."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", "2"]  # fmt: skip
    for name, script, args in (
        ("kineto-ddp", "ddp_profiled.py", ["--steps", "6", "--active", "3", "--trace-dir"]),
        ("kineto-ops", "kineto_ops.py", []),
    ):
        out = TRACES / name
        for _ in range(3):
            shutil.rmtree(out, ignore_errors=True)
            proc = subprocess.run([*torchrun, str(SCRIPTS / script), *args, str(out)],
                                  env=cli_env() | {"OMP_NUM_THREADS": "1"},
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            if proc.returncode == 0 or PROFILER_EXIT_ABORT not in proc.stderr:
                break
        checked(proc)
        print(f"{name}: {', '.join(sorted(p.name for p in out.iterdir()))}")


TRACE_SETS: dict[str, Callable[[], None]] = {"kineto_traces": kineto_traces}
"""Traces of other tools, recorded for the ingest tests (no report of their own)."""

SCENARIOS: dict[str, Callable[[Path], Scenario]] = {
    "balanced": balanced,
    "input_bound": input_bound,
    "oversubscribed": oversubscribed,
    "straggler_shared_core": straggler_shared_core,
    "compute_resnet50": compute_resnet50,
    "comm_bound": comm_bound,
    **{f"straggler_{where}_2": straggler(where, 2) for where in WHERE},
    "straggler_outside_3": straggler("outside", 3),
    "straggler_forward_spin_2": straggler("forward", 2, spin=True),
    "hang_host": hang("host"),
    "hang_mismatch": hang("mismatch"),
    "replicas": replicas,
    "failed_rank": failed_rank,
    "killed_rank": killed_rank,
    "profiled": profiled,
    "fsdp": fsdp,
    "p2p_pipeline": p2p_pipeline,
    "fsdp_tp": fsdp_tp,
    "slowdown_rank": slowdown_rank,
    "slowdown_link": slowdown_link,
}
"""In recording order: ``oversubscribed`` reads the balanced run's step time."""


def write_report(name: str) -> None:
    """Write the scenario's report from its run and print how it differs from the last."""
    s = load_scenario(name)
    before = recorded_report(s) if (s.folder / "report.txt").exists() else None
    now = report_of(s)
    store_report(s, now)
    if before is None:
        print(f"{name}: report written")
        return
    old, new = (r.text.splitlines() + json.dumps(r.diagnosis, indent=1, sort_keys=True).splitlines()
                for r in (before, now))  # fmt: skip
    diff = list(difflib.unified_diff(old, new, f"{name} (before)", f"{name} (now)", lineterm=""))
    print("\n".join(diff) if diff else f"{name}: report unchanged")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = [*SCENARIOS, *TRACE_SETS]
    p.add_argument("names", nargs="*", help=f"what to record (default: all): {', '.join(every)}")
    p.add_argument("--reports-only", action="store_true", help="keep the runs, redo the reports")
    p.add_argument("--list", action="store_true", help="print what it records, one a line")
    args = p.parse_args()
    if args.list:
        print("\n".join(every))
        return 0
    unknown = sorted(set(args.names) - set(every))
    if unknown:
        p.error(f"unknown scenario(s): {', '.join(unknown)}")
    names = [n for n in every if n in args.names] if args.names else every
    for name in (n for n in names if n in TRACE_SETS and not args.reports_only):
        TRACE_SETS[name]()
    for name in (n for n in names if n in SCENARIOS):
        if not args.reports_only:
            started = time.monotonic()
            scenario = SCENARIOS[name](RUNS / name)
            scenario = replace(scenario, recorded=dt.date.today().isoformat())
            save_scenario(scenario)
            print(f"{name}: recorded in {time.monotonic() - started:.0f} s, truth {scenario.truth}")
        write_report(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
