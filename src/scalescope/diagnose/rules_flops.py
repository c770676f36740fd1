"""Achieved FLOP/s of a run against an estimated peak of the cores it ran on.

The peak is an estimate: usable physical cores x fp32 FLOPs per cycle per core for the CPU's
widest vector ISA x clock. FLOPs per cycle assume two FMA pipes per core (Xeon Gold and
Platinum since Skylake-SP, EPYC since Zen 4, A64FX, Neoverse); parts with one FMA unit
reach half. AVX-512 and AVX frequency licences lower the real clock further, and AMX or
bfloat16 raise the peak of ``--bf16`` runs: the fraction is a guide, not a measurement.

The model's FLOPs are counted with ``torch.utils.flop_counter.FlopCounterMode`` on one image
of the run's size in the process that diagnoses (never in the ranks), for bench runs only:
a user script's model is unknown, so its FLOP/s is not judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from scalescope.diagnose.rules_input import (
    DiagnosisInput,
    ModelFlops,
    host_cores,
    hosts,
    machine_cores,
    mean_compute,
    mean_step,
    rank_times,
)

FP32_FLOPS_PER_CYCLE: dict[str, int] = {
    "AVX-512": 64,
    "AVX2": 32,
    "NEON": 16,
}
"""fp32 FLOPs per cycle per core = FMA pipes (2) x fp32 lanes x 2 (a fused multiply-add).
AVX-512: 2 x 16 x 2; AVX2 (with FMA): 2 x 8 x 2; NEON/ASIMD: 2 x 4 x 2. SVE: 2 x (vector
bits / 32) x 2, i.e. 64 for A64FX's 512-bit vectors (48 cores x 1.8 GHz x 64 = 5.5 TFLOP/s,
its published fp32 peak). These are fp32 rates; fp64 rates are half."""
AVX512_FLAGS = ("avx512f", "fma")
CLOCK_IN_MODEL = re.compile(r"@\s*([0-9.]+)\s*GHz", re.I)


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


def isa_rate(hardware: dict[str, Any]) -> tuple[int, str] | None:
    """fp32 FLOPs per cycle per core and the ISA it assumes; None for an unknown CPU."""
    flags = set(hardware.get("isa_flags") or ())
    if all(f in flags for f in AVX512_FLAGS):
        return FP32_FLOPS_PER_CYCLE["AVX-512"], "AVX-512"
    if {"avx2", "fma"} <= flags:
        return FP32_FLOPS_PER_CYCLE["AVX2"], "AVX2"
    bits = hardware.get("sve_vector_bits")
    if "sve" in flags and isinstance(bits, int) and bits >= 128:
        return 2 * (bits // 32) * 2, f"SVE-{bits}"
    if "asimd" in flags or "sve" in flags:
        return FP32_FLOPS_PER_CYCLE["NEON"], "NEON"
    return None


def clock_ghz(hardware: dict[str, Any]) -> float | None:
    """The clock from the facts (``cpu_mhz``), else the ``@ 2.10GHz`` of the model name."""
    mhz = hardware.get("cpu_mhz")
    if isinstance(mhz, int | float) and mhz > 0:
        return float(mhz) / 1000.0
    match = CLOCK_IN_MODEL.search(str(hardware.get("cpu_model") or ""))
    return float(match.group(1)) if match else None


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
        return "model FLOPs are counted for bench runs only (a script's model is unknown)"
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


def _num_classes(options: dict[str, Any]) -> int:
    data = options.get("data")
    if data:
        from pathlib import Path

        root = Path(data)
        if root.is_dir():
            return max(1, sum(1 for p in root.iterdir() if p.is_dir()))
    return int(options.get("num_classes") or 1000)


@lru_cache(maxsize=16)
def _forward_flops(model: str, image_size: int, num_classes: int) -> float:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from scalescope.bench.models import build_model

    net = build_model(model, num_classes, image_size=image_size).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        net(torch.zeros(1, 3, image_size, image_size))
    return float(counter.get_total_flops())


def count_model_flops(workload: str, options: dict[str, Any]) -> ModelFlops | None:
    """FLOPs of one sample of a bench run's model (None for scripts or unknown models)."""
    model, size = options.get("model") or workload, options.get("image_size")
    if workload == "script" or not model or not isinstance(size, int):
        return None
    try:
        forward = _forward_flops(model, size, _num_classes(options))
    except (ValueError, RuntimeError, TypeError):
        return None
    return ModelFlops(model=model, image_size=size, forward_flops=forward)
