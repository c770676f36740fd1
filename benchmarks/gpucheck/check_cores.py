"""Check 5: the cores. ``scale --ranks 1,2,4,8 --bench resnet18`` on the CPU; ``tune`` of
resnet18 over threads and ranks against ``torchrun --nproc-per-node 8`` defaults, re-measured
interleaved (benchmarks/tune_gain.py); ``project --validate`` of the study (fit on the
smaller sizes, predict the largest)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gpucheck import compare
from gpucheck.machine import Machine, few_cores
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip
from gpucheck.runner import Runner, attempt, read_json

TUNE_GAIN = Path(__file__).parents[1] / "tune_gain.py"
CPU_ONLY = {"CUDA_VISIBLE_DEVICES": ""}
TUNE_SPACE = ("threads_per_rank=1,2,4", "nproc_per_node=2,4,8")
_RATIO = re.compile(r"ratio tuned / torchrun: ([\d.]+) \(pairs ([^)]*)\)")


def run_scale(runner: Runner, plan: Plan) -> tuple[CheckResult, Path]:
    study = runner.dir("scale")
    runner.cli("scale", [
        "scale", "--ranks", ",".join(map(str, plan.scale_ranks)), "--bench", plan.scale_model,
        "--batch-size", str(plan.scale_batch), "--image-size", str(plan.scale_image),
        "--steps", str(plan.scale_steps), "--study-dir", str(study), *plan.scale_options,
    ], env=CPU_ONLY)  # fmt: skip
    points = read_json(study / "scale.json")["points"]
    return compare.scale_points(points, plan.scale_ranks), study


def run_validate(runner: Runner, study: Path) -> CheckResult:
    out = study / "validate.json"
    runner.cli("validate", ["project", "--validate", str(study), "--json", str(out)])
    return compare.validation(read_json(out))


def tune_ratio(log_text: str) -> tuple[float, str] | None:
    """tune_gain.py's ``ratio tuned / torchrun: 1.412 (pairs 1.38, 1.44)`` line."""
    found = _RATIO.search(log_text)
    return (float(found.group(1)), found.group(2)) if found else None


def run_tune(runner: Runner, plan: Plan) -> CheckResult:
    spaces = [w for s in TUNE_SPACE for w in ("--space", s)]
    log = runner.run("tune", [
        sys.executable, str(TUNE_GAIN), "--model", plan.scale_model,
        "--nproc", str(plan.tune_nproc), "--pairs", str(plan.tune_pairs),
        "--steps", str(plan.scale_steps), "--batch-size", str(plan.scale_batch),
        "--image-size", str(plan.scale_image), "--trials", str(plan.tune_trials),
        "--trial-seconds", str(plan.tune_trial_seconds), "--confirm", "2",
        "--confirm-rounds", "1", *spaces,
    ], env=CPU_ONLY)  # fmt: skip
    found = tune_ratio(log.read_text(errors="replace"))
    if found is None:
        return CheckResult("5.tune", "FAIL", reason=f"no ratio line in {log}")
    return compare.speedup(*found)


def check_cores(runner: Runner, plan: Plan, machine: Machine) -> list[CheckResult]:
    """Scale, then validate its study, then tune (the longest: the budget cuts it first)."""
    if not plan.smoke and (reason := few_cores(machine)):
        return [skip(c, reason) for c in ("5.scale", "5.validate", "5.tune")]
    study: list[Path] = []

    def scale() -> list[CheckResult]:
        result, where = run_scale(runner, plan)
        study.append(where)
        return [result]

    results = attempt("5.scale", scale)
    if study:
        results += attempt("5.validate", lambda: [run_validate(runner, study[0])])
    else:
        results.append(skip("5.validate", "no study: 5.scale did not run"))
    if plan.smoke:
        results.append(skip("5.tune", "--cpu-smoke: tune's study takes minutes"))
    elif reason := runner.no_time(plan.tune_trials * plan.tune_trial_seconds):
        results.append(skip("5.tune", reason))
    else:
        results += attempt("5.tune", lambda: [run_tune(runner, plan)])
    return results
