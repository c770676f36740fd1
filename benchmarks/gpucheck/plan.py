"""Sizes of each check: the full run on a lent GPU machine, and the CPU smoke's tiny ones."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Plan:
    smoke: bool
    device: str
    """cuda, or cpu for the smoke."""
    bench_model: str = "resnet50"
    bench_batch: int = 64
    bench_image: int = 224
    bench_steps: int = 60
    bench_warmup: int = 10
    overhead_pairs: int = 3
    other_model: str = "resnet18"
    """6.model: projected from check 2's run of ``bench_model`` and measured."""
    copy_iters: int = 10
    """Profiled steps of the copies' check (2.copy)."""
    comm_sizes: tuple[int, ...] = (4096, 1 << 20, 16 << 20)
    """Bytes per all_reduce (float32 elements x 4)."""
    comm_iters: int = 20
    cost_blocks: int = 11
    """Interleaved blocks per way of 3.nccl.cost (the probe's µs a collective)."""
    cost_calls: int = 500
    trace_model: str = "resnet50"
    trace_steps: int = 8
    scale_ranks: tuple[int, ...] = (1, 2, 4, 8)
    scale_model: str = "resnet18"
    scale_batch: int = 16
    scale_image: int = 64
    scale_steps: int = 20
    scale_options: tuple[str, ...] = ()
    """More options of ``scale`` (the smoke's 3 ranks on 2 cores need ``--oversubscribe``)."""
    tune_nproc: int = 8
    tune_trials: int = 6
    tune_trial_seconds: float = 40.0
    tune_pairs: int = 2
    project_steps: int = 6
    env: dict[str, str] = field(default_factory=dict)
    """Set for every command (the smoke: one thread, for a small shared machine)."""


FULL = Plan(smoke=False, device="cuda")

SMOKE = Plan(
    smoke=True, device="cpu", bench_model="resnet18", bench_batch=4, bench_image=32,
    bench_steps=12, bench_warmup=3, overhead_pairs=1, comm_sizes=(4096, 65536), comm_iters=5,
    cost_blocks=3, cost_calls=100,
    trace_model="resnet18", trace_steps=4, scale_ranks=(1, 2, 3), scale_batch=4, scale_image=32,
    scale_steps=8, scale_options=("--oversubscribe",), project_steps=4,
    env={"OMP_NUM_THREADS": "1"},
)  # fmt: skip
"""Tiny sizes on the CPU: proves the plumbing (probe vs the workload's clock, the trace vs the
probe's counts), not the GPU paths."""
