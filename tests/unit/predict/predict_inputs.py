"""Test helper (not a test module): measured inputs of a run, written by hand."""

from __future__ import annotations

from dataclasses import replace

from scalescope.analyze.comm.alpha_beta import AlphaBetaFit
from scalescope.predict.costs import ModelCost
from scalescope.predict.inputs import Placement, RunInputs

HARDWARE = {"isa_flags": ["avx2", "fma"], "cpu_mhz": 2000.0, "physical_cores": 2}
"""AVX2 with FMA: 32 fp32 FLOP per cycle per core, at 2 GHz: 64 GFLOP/s per core."""


def inputs(**changes: object) -> RunInputs:
    """A 2-rank run on 2 cores: 100 ms compute (60 backward), 2 ms data, 3 ms other,
    10 ms exposed, 4 ms waiting, buckets of 4 and 2 MB, transfers of 1 µs + 1 ns/B."""
    base = RunInputs(
        run_dir="hand-made",
        world_size=2,
        nodes=1,
        placement=Placement(ranks_per_node=2, threads_per_rank=1, node_cores=2),
        per_rank_batch=8.0,
        compute_ms=100.0,
        compute_cv=0.1,
        backward_ms=60.0,
        data_ms=2.0,
        other_ms=3.0,
        exposed_ms=10.0,
        waiting_ms=4.0,
        step_ms=119.0,
        samples_per_s=2 * 8 / 0.119,
        buckets=(4_000_000, 2_000_000),
        transfer_fit=AlphaBetaFit(
            op="all_reduce",
            backend="run",
            world_size=2,
            alpha_s=1e-6,
            beta_s_per_byte=1e-9,
            rel_err=0.05,
            num_points=2,
            min_bytes=2_000_000,
            max_bytes=4_000_000,
        ),  # fmt: skip
        peak_memory_bytes=1_000_000_000,
        precision="fp32",
        cost=ModelCost(
            model="toy",
            image_size=32,
            flops_per_sample=2.0e8,
            activation_traffic_per_sample=1.0e7,
            parameter_bytes=4.0e7,
            activation_bytes_per_sample=5.0e6,
        ),  # fmt: skip
        hardware=HARDWARE,
    )
    return replace(base, **changes)
