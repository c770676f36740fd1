"""Check 1: ``scalescope env`` names the GPU, driver, CUDA, NCCL and the GPU's peak figures."""

from __future__ import annotations

from gpucheck import compare
from gpucheck.machine import Machine, no_cuda
from gpucheck.plan import Plan
from gpucheck.results import CheckResult, skip
from gpucheck.runner import Runner, read_json


def check_env(runner: Runner, plan: Plan, machine: Machine) -> list[CheckResult]:
    if not plan.smoke and (reason := no_cuda(machine)):
        return [skip("1.env", reason)]
    path = runner.work / "env.json"
    runner.cli("env", ["env", "--json", str(path)])
    return [compare.env_facts(read_json(path), plan.device)]
