"""The FLOP/s peak estimate: fp32 FLOPs per cycle by ISA, the clock, a known peak."""

from __future__ import annotations

import pytest
from diagnose_inputs import analysis, make_input, run_meta

from scalescope.analyze.peak import clock_ghz, isa_rate
from scalescope.diagnose.rules_flops import peak_flops


@pytest.mark.parametrize(
    ("flags", "bits", "expected"),
    [
        (["avx2", "fma", "avx512f"], None, (64, "AVX-512")),
        (["avx2", "fma"], None, (32, "AVX2")),
        (["asimd", "sve"], 512, (64, "SVE-512")),
        (["asimd"], None, (16, "NEON")),
        (["sse4_2"], None, None),
    ],
)
def test_fp32_flops_per_cycle_by_isa(flags, bits, expected):
    assert isa_rate({"isa_flags": flags, "sve_vector_bits": bits}) == expected


def test_clock_from_facts_or_model_name_and_a64fx_peak():
    assert clock_ghz({"cpu_mhz": 2100.0}) == pytest.approx(2.1)
    assert clock_ghz({"cpu_model": "Intel(R) Xeon(R) Processor @ 2.10GHz"}) == pytest.approx(2.1)
    assert clock_ghz({"cpu_model": "A64FX"}) is None
    a64fx = {"isa_flags": ["asimd", "sve"], "sve_vector_bits": 512, "cpu_mhz": 1800.0,
             "physical_cores": 48, "usable_cores": 48}  # fmt: skip
    ctx = make_input(analysis(None), meta=run_meta(hardware=a64fx))
    peak = peak_flops(ctx)
    assert peak.flops_per_s == pytest.approx(5.53e12, rel=0.01), "A64FX's fp32 peak"
