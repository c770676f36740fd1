"""Check 3: collectives on CUDA tensors, two ranks sharing the GPU over gloo and one rank
over NCCL, recorded by the probe and by torch.profiler in the same run: every call counted
with its exact bytes by both, and the probe's CUDA-event time per size within 10 % of the
trace's (``scalescope analyze`` of it); then what the probe adds to each collective on one
NCCL rank, in the way it takes on this torch (check_cost.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpucheck import compare
from gpucheck.check_cost import check_cost
from gpucheck.machine import Machine, no_cuda, no_nccl
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip
from gpucheck.runner import Runner, attempt, read_json

SCRIPT = Path(__file__).with_name("profiled.py")
WARMUP_BYTES = 8
"""profiled.py's unprofiled first call (the probe sees it, the trace does not)."""


@dataclass(frozen=True)
class CommCase:
    name: str
    backend: str
    device: str
    nproc: int


GPU_CASES = (CommCase("3.gloo-cuda", "gloo", "cuda", 2), CommCase("3.nccl", "nccl", "cuda", 1))
SMOKE_CASES = (CommCase("3.gloo-cpu", "gloo", "cpu", 2),)


@dataclass(frozen=True)
class Records:
    probe: dict
    """report --json of the probe's run directory."""
    trace: dict
    """analyze --json of torch.profiler's traces of the same run."""
    trace_dir: Path | None = None


def profiled_run(
    runner: Runner, name: str, nproc: int, script_args: list[str], run_args: tuple[str, ...] = ()
) -> Records:
    """``scalescope run`` of profiled.py, then the probe's report and the trace's analysis;
    ``--record full``: every call's row, counted against the trace's."""
    run_dir, trace_dir = runner.dir(name), runner.dir(f"{name}-trace")
    runner.cli(name, [
        "run", "-n", str(nproc), "--run-dir", str(run_dir), "--no-report", "--record", "full",
        *run_args, str(SCRIPT),
        "--trace-dir", str(trace_dir), *script_args,
    ])  # fmt: skip
    runner.cli(f"{name}-report", ["report", str(run_dir), "--json", str(run_dir / "r.json")])
    runner.cli(f"{name}-analyze", ["analyze", str(trace_dir), "--json", str(run_dir / "a.json")])
    return Records(read_json(run_dir / "r.json"), read_json(run_dir / "a.json"), trace_dir)


def judged(case: CommCase) -> bool:
    """Only NCCL across two GPUs or more times the same thing in the probe and the trace
    (compare.times_agree); one GPU gives the figures as INFO."""
    return case.backend == "nccl" and case.nproc > 1


def judge(
    case: CommCase, records: Records, sizes: tuple[int, ...], iters: int
) -> list[CheckResult]:
    probe, trace = compare.size_rows(records.probe), compare.size_rows(records.trace)
    expected = dict.fromkeys(sizes, iters)
    return [
        compare.counts_exact(f"{case.name}.probe", probe, {WARMUP_BYTES: 1, **expected}),
        compare.counts_exact(f"{case.name}.trace", trace, expected),
        compare.times_agree(f"{case.name}.time", probe, trace, judged=judged(case)),
    ]


def check_case(runner: Runner, plan: Plan, case: CommCase) -> list[CheckResult]:
    args = [
        "--backend", case.backend, "--device", case.device,
        "--sizes", ",".join(map(str, plan.comm_sizes)), "--iters", str(plan.comm_iters),
    ]  # fmt: skip
    records = profiled_run(runner, case.name.replace(".", "-"), case.nproc, args)
    return judge(case, records, plan.comm_sizes, plan.comm_iters)


def check_comm(runner: Runner, plan: Plan, machine: Machine) -> list[CheckResult]:
    results: list[CheckResult] = []
    for case in SMOKE_CASES if plan.smoke else GPU_CASES:
        reason = None if plan.smoke else (no_nccl if case.backend == "nccl" else no_cuda)(machine)
        if reason:
            results += [skip(f"{case.name}.{part}", reason) for part in ("probe", "trace", "time")]
            continue
        results += attempt(case.name, lambda case=case: check_case(runner, plan, case))
    return results + attempt("3.cost", lambda: check_cost(runner, plan, machine))
