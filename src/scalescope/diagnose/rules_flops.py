"""Achieved FLOP/s of a run against an estimated peak of the cores it ran on.

The peak is cores x fp32 FLOPs per cycle x clock (analyze/peak.py: an estimate, not a
measurement); the model's FLOPs per sample come from bench/flops.py, for bench runs only:
a user script's model is unknown, so its FLOP/s is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalescope.analyze.peak import clock_ghz, isa_rate
from scalescope.bench.flops import why_no_flops
from scalescope.diagnose.rules_input import (
    DiagnosisInput,
    host_cores,
    hosts,
    machine_cores,
    mean_compute,
    mean_step,
    rank_times,
)


@dataclass(frozen=True)
class PeakFlops:
    flops_per_s: float
    cores: int
    flops_per_cycle: int
    ghz: float
    isa: str


@dataclass(frozen=True)
class Efficiency:
    """Achieved FLOP/s: over the whole run, and while the ranks compute."""

    flops_per_sample: float
    achieved_flops_per_s: float | None
    """flops_per_sample x samples/s of the job (data, communication and waits included)."""
    compute_flops_per_s: float
    """Sum over ranks of their FLOPs per step / their forward+backward+optimizer time."""
    peak: PeakFlops
    fraction: float
    """compute_flops_per_s / peak: how well the cores are used while computing."""


def job_cores(ctx: DiagnosisInput) -> int | None:
    """Physical cores the job's ranks ran on, summed over hosts (same hardware assumed)."""
    hardware = ctx.meta.hardware
    if not ctx.ranks:
        cores = machine_cores(hardware)
        return cores * max(ctx.meta.nnodes, 1) if cores else None
    counts = [host_cores(ranks, hardware) for ranks in hosts(ctx).values()]
    return sum(c for c in counts if c) or None


def peak_flops(ctx: DiagnosisInput) -> PeakFlops | str:
    """The estimated fp32 peak of the job's cores, or why it cannot be estimated."""
    hardware = ctx.meta.hardware
    if hardware.get("gpus"):
        return "the peak FLOP/s of GPUs is not in the hardware facts"
    rate, ghz, cores = isa_rate(hardware), clock_ghz(hardware), job_cores(ctx)
    if rate is None:
        return "the CPU's vector ISA is not in the hardware facts"
    if ghz is None:
        return "the CPU clock is not in the hardware facts (cpu_mhz)"
    if cores is None:
        return "the number of cores is not in the hardware facts"
    per_cycle, isa = rate
    return PeakFlops(cores * per_cycle * ghz * 1e9, cores, per_cycle, ghz, isa)


def efficiency(ctx: DiagnosisInput) -> Efficiency | str:
    """Achieved against peak FLOP/s, or why it cannot be judged."""
    if ctx.model_flops is None:
        return why_no_flops(ctx.meta.workload, ctx.meta.options)
    peak = peak_flops(ctx)
    if isinstance(peak, str):
        return peak
    flops = ctx.model_flops.train_flops
    rates = [
        t.samples_per_step * flops / (t.compute_ms / 1e3)
        for t in rank_times(ctx.analysis)
        if t.samples_per_step and t.compute_ms
    ]
    if not rates:
        return "no step recorded both its samples and its compute phases"
    steps = ctx.analysis.steps
    overall = flops * steps.samples_per_s if steps and steps.samples_per_s else None
    return Efficiency(flops, overall, sum(rates), peak, sum(rates) / peak.flops_per_s)


def ideal_compute_ms(ctx: DiagnosisInput, eff: Efficiency) -> float:
    """Compute time per step of the same samples at ``flops_expected_fraction`` of peak.

    The ranks compute concurrently on the job's cores: the job's FLOPs per step over the
    expected rate of all of them."""
    flops = sum(
        (t.samples_per_step or 0.0) * eff.flops_per_sample for t in rank_times(ctx.analysis)
    )
    rate = ctx.thresholds.flops_expected_fraction * eff.peak.flops_per_s
    return 1e3 * flops / rate


def shortfall_ms(ctx: DiagnosisInput, eff: Efficiency) -> float:
    """Compute time per step above what ``flops_expected_fraction`` of peak would take."""
    compute = mean_compute(rank_times(ctx.analysis)) or 0.0
    return max(0.0, compute - ideal_compute_ms(ctx, eff))


def step_excess_ms(ctx: DiagnosisInput, eff: Efficiency, kept_ms: float) -> float:
    """Step time above ideal compute + ``kept_ms`` (the data wait and exposed
    communication a good placement would still have): what a placement that slows the
    ranks and makes them wait for each other costs."""
    step = mean_step(rank_times(ctx.analysis)) or 0.0
    return max(0.0, step - ideal_compute_ms(ctx, eff) - kept_ms)
