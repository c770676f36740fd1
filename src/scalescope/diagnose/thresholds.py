"""Every threshold of the run diagnosis, in one place (documented in docs/diagnosis.md).

A rule fires when a measured value crosses one of these; the finding states both. Change
one with ``Thresholds(data_share_pct=20)`` (keyword-only; bad values raise ``ValueError``).
The environment checks keep theirs in ``env_checks.EnvThresholds``; the cross-rank analysis
names a straggler with its own rule (``analyze/cross_rank.py``), which this one reuses.
"""

from __future__ import annotations

from dataclasses import dataclass

PERCENT_FIELDS = (
    "data_share_pct",
    "copy_share_pct",
    "exposed_comm_share_pct",
    "small_message_time_pct",
    "straggler_cost_pct",
    "imbalance_pct",
    "compute_share_pct",
    "slower_cpu_pct",
)
FRACTION_FIELDS = (
    "busbw_link_fraction",
    "memory_fraction",
    "flops_low_fraction",
    "flops_expected_fraction",
    "min_core_use",
)


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """The limits the diagnosis rules compare measurements with."""

    data_share_pct: float = 10.0
    """Input-bound when the step waits for the DataLoader at least this share of its time.
    A prefetching loader should hide loading entirely; 10% is a cost worth a change."""
    copy_share_pct: float = 5.0
    """Batches copied to the device from pageable memory (the ``to_device`` phase) at least
    this share of the step: pinned memory and ``non_blocking`` copies overlap them."""
    small_file_bytes: int = 1 << 20
    """An input-bound run reading image files smaller than this on average (1 MiB) ..."""
    many_files: int = 10_000
    """... from a folder of at least this many is told to pack them into shards: per-file
    opens, not bytes, limit shared parallel file systems."""
    exposed_comm_share_pct: float = 10.0
    """Communication-bound when exposed communication (``comm_wait`` of the rank that waits
    least for others) is at least this share of the step."""
    small_message_bytes: int = 1 << 20
    """Collectives below this size (1 MiB) are latency-dominated: 1 MiB moves in ~85 us at
    100 Gb/s, about the fixed cost of a few ring steps on gloo/TCP; DDP's first bucket is
    1 MiB, its others 25 MB by default."""
    small_message_time_pct: float = 50.0
    """Exposed communication is judged latency-bound (not bandwidth-bound) when at least this
    share of the collective time goes to messages below ``small_message_bytes``."""
    many_calls_per_step: float = 8.0
    """Collectives per step from which fusing them (larger DDP buckets) is the first remedy
    of a latency-bound run; DDP's default 25 MB buckets give a few per step for most CNNs."""
    busbw_link_fraction: float = 0.5
    """Large messages whose busbw is below this fraction of the link's bandwidth are flagged
    (only when the link's bandwidth is known: hardware facts ``link_gbps``)."""
    straggler_cost_pct: float = 10.0
    """A straggler named by the cross-rank analysis is reported when its busy time exceeds
    the others' by at least this share of the step (balanced runs on an idle 2-core VM: up
    to 7%; the analysis' own naming floor is 10% of lateness per step)."""
    preempted_ratio: float = 1.5
    """A straggler whose threads were preempted (involuntary context switches over the whole
    rank) this many times as often as the other ranks' median shares its cpus with another
    process. resnet18, 2 ranks bound one core each on a 2-core VM, 20 s runs: a busy loop
    on rank 1's core gave 1.9-2.0x; balanced runs stayed within 1.15x (gloo's and the
    loader's threads preempt a rank's compute thread ~1,500 times in either case)."""
    slower_cpu_pct: float = 10.0
    """A straggler that used this much more CPU time than the others' mean for the same
    work ran on slower cores (a virtual machine's shared physical core, a lower clock). The
    same VM's "balanced" runs that named a straggler: 11% and 29% more CPU time; the others
    within 6%."""
    imbalance_pct: float = 10.0
    """Load imbalance ((max - mean) / mean of per-rank busy time) from which it is reported
    when no single straggler is named."""
    compute_share_pct: float = 70.0
    """Compute-bound when forward + backward + optimizer take at least this share of the
    step: data, communication and waiting together take less than 30%."""
    flops_low_fraction: float = 0.25
    """Compute is flagged as inefficient (a warning, not just information) below this
    fraction of the estimated peak FLOP/s: half of what tuned runs reach."""
    flops_expected_fraction: float = 0.50
    """What tuned fp32 CNN training reaches while computing, as a fraction of the peak
    estimated from the facts: 40-60% (ResNet-50 on A64FX: ~2.2 of 5.4 TFLOP/s = 41% over
    whole steps; resnet18 bound one thread per core on a 2.1 GHz AVX-512 Xeon VM: 49-59%
    while computing). Savings of compute and placement findings are estimated against a
    run that computes at this fraction of the peak."""
    memory_fraction: float = 0.85
    """Peak memory of the ranks of a host (or of a GPU) from this fraction of its capacity:
    the allocator, the page cache and the OS need the rest; beyond it a larger batch fails."""
    max_threads_per_core: float = 1.0
    """Oversubscribed when the compute threads of a host's ranks exceed its physical cores
    times this (OpenMP threads that share a core spin against each other at barriers)."""
    min_core_use: float = 0.5
    """Idle cores when a host's ranks run fewer threads than this fraction of its cores."""

    def __post_init__(self) -> None:
        for name in PERCENT_FIELDS:
            value = getattr(self, name)
            if not 0 < value <= 100:
                raise ValueError(f"{name} must be in (0, 100], got {value}")
        for name in FRACTION_FIELDS:
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        for name in ("small_message_bytes", "small_file_bytes", "many_files"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("many_calls_per_step", "max_threads_per_core", "preempted_ratio"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.flops_low_fraction > self.flops_expected_fraction:
            raise ValueError("flops_low_fraction must not exceed flops_expected_fraction")


DEFAULT_THRESHOLDS = Thresholds()
