"""Check 3's cost line: the way the probe takes on this machine's torch (its group hooks in
C++, the c10d ops intercepted at the dispatcher in C++, or the ``dist.*`` wrappers) and what
it adds to each collective, one NCCL rank, 8-byte all_reduces on the GPU, interleaved blocks
against no probe and each other way this torch offers (benchmarks/workers/collective_cost.py).
Target (issue 40): at most 2 µs a collective. The CPU smoke runs it on gloo as INFO."""

from __future__ import annotations

from pathlib import Path

from gpucheck.machine import Machine, no_nccl
from gpucheck.plan import Plan
from gpucheck.results import INFO, CheckResult, skip, verdict
from gpucheck.runner import Runner, read_json

WORKER = Path(__file__).resolve().parents[1] / "workers" / "collective_cost.py"
TARGET_US = 2.0
NAMES = {
    "probe": "the probe",
    "dispatcher": "c10d ops at the dispatcher",
    "python": "Python hooks",
    "wrappers": "dist.* wrappers",
}


def judge_cost(check: str, result: dict, judged: bool) -> CheckResult:
    """The probe's added µs a call (its chosen way) against the target; the other ways'
    figures beside it. ``judged=False``: INFO (a shared CPU is no place to hold 2 µs)."""
    per_call = result["all_reduce_us"]
    off = per_call["off"]
    added = {way: us - off for way, us in per_call.items() if way != "off"}
    others = ", ".join(f"{NAMES.get(w, w)} {us:+.2f} µs" for w, us in added.items() if w != "probe")
    figure = (
        f"{result['probe_way']}: {added['probe']:+.2f} µs a call ({off:.2f} µs without; "
        f"<= {TARGET_US:g} µs); {others}; torch {result['torch']}, {result['backend']}"
    )
    data = {"added_us": added, "off_us": off, "way": result["probe_way"], "torch": result["torch"]}
    if not judged:
        return CheckResult(check, INFO, figure, data=data)
    return verdict(check, added["probe"] <= TARGET_US, figure, **data)


def check_cost(runner: Runner, plan: Plan, machine: Machine) -> list[CheckResult]:
    check = "3.gloo-cpu.cost" if plan.smoke else "3.nccl.cost"
    if not plan.smoke and (reason := no_nccl(machine)):
        return [skip(check, reason)]
    run_dir = runner.dir(check.replace(".", "-"))
    out = runner.work / f"{check}.json"
    runner.cli(check.replace(".", "-"), [
        "run", "-n", "1", "--no-probe", "--no-report", "--run-dir", str(run_dir), str(WORKER),
        "--out", str(out), "--backend", "gloo" if plan.smoke else "nccl",
        "--blocks", str(plan.cost_blocks), "--calls", str(plan.cost_calls),
    ])  # fmt: skip
    return [judge_cost(check, read_json(out), judged=not plan.smoke)]
