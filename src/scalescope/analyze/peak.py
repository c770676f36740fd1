"""The fp32 peak FLOP/s rate of a CPU from the run's hardware facts.

The peak is an estimate: usable physical cores x fp32 FLOPs per cycle per core for the CPU's
widest vector ISA x clock. FLOPs per cycle assume two FMA pipes per core (Xeon Gold and
Platinum since Skylake-SP, EPYC since Zen 4, A64FX, Neoverse); parts with one FMA unit
reach half. AVX-512 and AVX frequency licences lower the real clock further, and AMX or
bfloat16 raise the peak of ``--bf16`` runs: the fraction is a guide, not a measurement.
Used by the diagnosis (FLOP/s against peak) and the projection (roofline).
"""

from __future__ import annotations

import re
from typing import Any

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
