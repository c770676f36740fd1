"""Check 7: FSDP2 on the GPU. ``scalescope run`` of the tests' FSDP2 script
(tests/e2e/scripts/fsdp_train.py: ``fully_shard`` on each block, then on the root).

- ``7.fsdp-gloo-cuda``: two ranks sharing the GPU over gloo with CUDA tensors. Every
  measured step, each unit's all-gathers and reduce-scatters must be exactly what the
  model's parameters imply (counted here from the script's own model, not by the probe),
  every one completed, and the report must give no "never synchronise" advice.
- ``7.fsdp-nccl``: one rank over NCCL (NCCL takes one rank per GPU), with ``--dtensor``:
  the functional all_reduce must be recorded with its exact bytes; what FSDP issues with a
  world of one (torch skips the all-gather there) is INFO.
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from pathlib import Path
from typing import Any

from gpucheck.machine import Machine, no_cuda, no_nccl
from gpucheck.plan import Plan
from gpucheck.results import INFO, CheckResult, skip, verdict
from gpucheck.runner import Runner, attempt, read_json

SCRIPT = Path(__file__).resolve().parents[2] / "tests" / "e2e" / "scripts" / "fsdp_train.py"
STEPS = 6
WARMUP = 1
"""The first step is left out: FSDP's lazy init issues its own collectives there."""


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location("fsdp_train", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def padded_bytes(shape: tuple[int, ...], itemsize: int, world: int) -> int:
    """FSDP2 shards dim 0, padded to a multiple of the world size."""
    rows = math.ceil(shape[0] / world) * world if shape else 1
    return rows * math.prod(shape[1:]) * itemsize


def expected_per_step(world: int, reshard: bool = True) -> Counter:
    """(op, tag, bytes) -> calls per step, from the model's parameters: every unit is gathered
    for forward and again for backward when resharded (the script passes
    ``reshard_after_forward`` to the root too, so torch's keep-the-root heuristic is off);
    each unit's gradients are reduce-scattered once."""
    script = load_script()
    model = script.build_model()

    def size(modules: list[Any]) -> int:
        return sum(
            padded_bytes(tuple(p.shape), p.element_size(), world)
            for m in modules
            for p in m.parameters()
        )

    units = {f"blocks.{i}": size([b]) for i, b in enumerate(model.blocks)}
    root = size([model.embed, model.head])
    want: Counter = Counter()
    for unit, nbytes in units.items():
        want[("all_gather", f"unshard:{unit}", nbytes)] = 2 if reshard else 1
        want[("reduce_scatter", f"reduce_grads:{unit}", nbytes)] = 1
    want[("all_gather", "unshard:root", root)] = 2 if reshard else 1
    want[("reduce_scatter", "reduce_grads:root", root)] = 1
    return want


def recorded(run_dir: Path) -> tuple[dict[tuple[int, int], Counter], int, int]:
    """Per (rank, step): Counter of (op, tag, bytes); and calls completed / incomplete."""
    from scalescope.events import Kind, load_run

    run = load_run(run_dir)
    ev = run.events
    coll = ev.select(ev.kind == int(Kind.COLLECTIVE))
    per: dict[tuple[int, int], Counter] = {}
    keys = zip(
        coll.rank.tolist(), coll.step.tolist(), coll.strings("name"), coll.strings("tag"),
        coll.nbytes.tolist(), strict=True,
    )  # fmt: skip
    for rank, step, name, tag, nbytes in keys:
        per.setdefault((rank, step), Counter())[(name, tag, nbytes)] += 1
    done = int((coll.dur_ns >= 0).sum())
    return per, done, len(coll) - done


def scalescope_run(runner: Runner, name: str, nproc: int, args: list[str]) -> tuple[Path, dict]:
    run_dir = runner.dir(name)
    runner.cli(name, [
        "run", "-n", str(nproc), "--run-dir", str(run_dir), "--no-report", "--record", "full",
        str(SCRIPT), "--steps", str(STEPS), *args,
    ])  # fmt: skip
    runner.cli(f"{name}-report", ["report", str(run_dir), "--json", str(run_dir / "r.json")])
    return run_dir, read_json(run_dir / "r.json")


def replica_advice(report: dict) -> list[str]:
    findings = ((report.get("diagnosis") or {}).get("findings")) or []
    return [f["code"] for f in findings if f.get("code") == "INDEPENDENT_REPLICAS"]


def judge_units(check: str, run_dir: Path, report: dict, world: int) -> list[CheckResult]:
    per, done, incomplete = recorded(run_dir)
    want = expected_per_step(world)
    wrong = []
    for rank in range(world):
        for step in range(WARMUP, STEPS):
            got = Counter(
                {k: v for k, v in per.get((rank, step), Counter()).items() if k[0] in OPS}
            )
            if got != want:
                missing, extra = want - got, got - want
                wrong.append(
                    f"rank {rank} step {step}: missing {dict(missing)} extra {dict(extra)}"
                )
    calls = sum(want.values())
    return [
        verdict(
            f"{check}.units",
            not wrong,
            f"{calls} unit collectives per step and rank as the parameters imply"
            if not wrong
            else "; ".join(wrong[:3]),
            expected=len(want),
        ),  # fmt: skip
        verdict(
            f"{check}.complete",
            incomplete == 0 and done > 0,
            f"{done} calls completed, {incomplete} never completed",
        ),
        verdict(
            f"{check}.advice",
            not replica_advice(report),
            f"replica findings: {replica_advice(report) or 'none'}",
        ),
        memory_info(check, report),
    ]


OPS = ("all_gather", "reduce_scatter")


def memory_info(check: str, report: dict) -> CheckResult:
    peaks = []
    for r in (report.get("steps") or {}).get("ranks") or []:
        rows = [m["peak_bytes"] for m in r.get("memory", []) if m["name"] == "cuda_max_allocated"]
        if rows:
            peaks.append(f"rank {r.get('rank')}: {max(rows) / 2**20:.1f} MiB")
    return CheckResult(
        f"{check}.memory", INFO, "peak cuda_max_allocated " + (", ".join(peaks) or "none")
    )


def judge_nccl(check: str, run_dir: Path, report: dict, funcol_bytes: int) -> list[CheckResult]:
    per, done, incomplete = recorded(run_dir)
    total: Counter = Counter()
    for counts in per.values():
        total.update(counts)
    funcol = sum(v for (op, _t, n), v in total.items() if op == "all_reduce" and n == funcol_bytes)
    ops: Counter = Counter()
    for (op, tag, _n), v in total.items():
        ops[f"{op}/{tag.split(':')[0] or '-'}"] += v
    return [
        verdict(
            f"{check}.funcol",
            funcol == 1,
            f"functional all_reduce of {funcol_bytes} B recorded {funcol} time(s), expected 1",
        ),  # fmt: skip
        completion(check, done, incomplete),
        CheckResult(f"{check}.ops", INFO, ", ".join(f"{k} x{v}" for k, v in sorted(ops.items()))),
        memory_info(check, report),
    ]


def completion(check: str, done: int, incomplete: int) -> CheckResult:
    ok = incomplete == 0 and done > 0
    return verdict(f"{check}.complete", ok, f"{done} calls completed, {incomplete} never completed")


def gloo_cuda(runner: Runner) -> list[CheckResult]:
    run_dir, report = scalescope_run(
        runner, "fsdp-gloo-cuda", 2, ["--device", "cuda", "--backend", "gloo"]
    )
    return judge_units("7.fsdp-gloo-cuda", run_dir, report, 2)


def nccl(runner: Runner) -> list[CheckResult]:
    run_dir, report = scalescope_run(
        runner, "fsdp-nccl", 1, ["--device", "cuda", "--backend", "nccl", "--dtensor"]
    )
    return judge_nccl("7.fsdp-nccl", run_dir, report, load_script().FUNCOL_NUMEL * 4)


def gloo_cpu(runner: Runner) -> list[CheckResult]:
    run_dir, report = scalescope_run(runner, "fsdp-gloo-cpu", 2, ["--device", "cpu"])
    return judge_units("7.fsdp-gloo-cpu", run_dir, report, 2)


def check_fsdp(runner: Runner, plan: Plan, machine: Machine) -> list[CheckResult]:
    if plan.smoke:
        return attempt("7.fsdp-gloo-cpu", lambda: gloo_cpu(runner))
    results: list[CheckResult] = []
    for name, reason, step in (
        ("7.fsdp-gloo-cuda", no_cuda(machine), gloo_cuda),
        ("7.fsdp-nccl", no_nccl(machine), nccl),
    ):
        if reason:
            results.append(skip(name, reason))
            continue
        results += attempt(name, lambda step=step: step(runner))
    return results
