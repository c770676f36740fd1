"""GPU activity of a Kineto trace: kernels, memory copies and sets, NCCL kernels, idle share.

Kineto writes one complete event per device activity: ``cat`` ``kernel`` (NCCL's kernels
are those whose name has ``nccl`` in it: ``ncclKernel_*``, ``ncclDevKernel_*``, some
prefixed with ``void ``),
``gpu_memcpy`` (``args.bytes``) and ``gpu_memset``. The GPU is busy where at least one of
them runs on any stream; the idle share is the rest of the window, the profiled steps
(``ProfilerStep#N``) when the trace has them, else first to last device activity — the
definition of Holistic Trace Analysis' temporal breakdown.

Communication exposed on the GPU: the union of the NCCL kernels in the window, less its
intersection with the union of the compute kernels (on any stream). The overlapped share
is Holistic Trace Analysis' computation-communication overlap (``comm_comp_overlap``):
the time communication kernels run while a compute kernel runs, over their time.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

KERNEL = "kernel"
MEMCPY = "gpu_memcpy"
MEMSET = "gpu_memset"
GPU_CATEGORIES = (KERNEL, MEMCPY, MEMSET)
NCCL_MARK = "nccl"
KINDS = ("kernel", "nccl_kernel", "memcpy", "memset")


@dataclass
class GpuScan:
    """Device activities of one file as they stream by (microseconds of the file)."""

    starts_us: array = field(default_factory=lambda: array("d"))
    ends_us: array = field(default_factory=lambda: array("d"))
    counts: dict[str, int] = field(default_factory=dict)
    time_us: dict[str, float] = field(default_factory=dict)
    memcpy_bytes: int = 0
    kinds: array = field(default_factory=lambda: array("b"))
    """Per activity: its index in ``KINDS``."""

    def add(self, kind: str, start_us: float, dur_us: float, nbytes: int | None = None) -> None:
        self.kinds.append(KINDS.index(kind))
        self.starts_us.append(start_us)
        self.ends_us.append(start_us + dur_us)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.time_us[kind] = self.time_us.get(kind, 0.0) + dur_us
        if kind == "memcpy" and nbytes:
            self.memcpy_bytes += nbytes


def activity_kind(cat: str | None, name: str) -> str | None:
    """``kernel``, ``nccl_kernel``, ``memcpy``, ``memset``, or None for a host event."""
    if cat == KERNEL:
        return "nccl_kernel" if NCCL_MARK in name[:64].lower() else "kernel"
    if cat == MEMCPY:
        return "memcpy"
    if cat == MEMSET:
        return "memset"
    return None


@dataclass(frozen=True)
class GpuActivity:
    """One rank's device time by kind, and how much of the window the GPU had nothing to do."""

    rank: int
    kernels: int
    kernel_ms: float
    """Compute kernels (not NCCL), summed over streams."""
    nccl_kernels: int
    nccl_kernel_ms: float
    memcpys: int
    memcpy_ms: float
    memcpy_bytes: int
    memsets: int
    memset_ms: float
    window_ms: float
    """The profiled steps' span, else first to last device activity."""
    busy_ms: float
    """Union of every device activity inside the window (streams that overlap count once)."""
    idle_pct: float
    """(window - busy) / window x 100."""
    nccl_busy_ms: float = 0.0
    """Union of the NCCL kernels inside the window."""
    nccl_exposed_ms: float = 0.0
    """Of which no compute kernel ran at the same time (on any stream)."""
    nccl_overlap_pct: float | None = None
    """(nccl_busy - nccl_exposed) / nccl_busy x 100, HTA's comm_comp_overlap; None
    without NCCL kernels in the window."""


def busy_union_us(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> float:
    """Length of the union of [start, end) intervals clipped to [lo, hi)."""
    block_starts, block_ends = merged_blocks(starts, ends, lo, hi)
    return float(np.sum(block_ends - block_starts))


def merged_blocks(
    starts: np.ndarray, ends: np.ndarray, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals clipped to [lo, hi), as sorted disjoint blocks."""
    if len(starts) == 0 or hi <= lo:
        return np.zeros(0), np.zeros(0)
    s, e = np.clip(starts, lo, hi), np.clip(ends, lo, hi)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # an interval starts a new busy block when it begins after everything before it ended
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > reach[:-1]
    block_ids = np.cumsum(new_block) - 1
    block_starts = s[new_block]
    block_ends = np.zeros(len(block_starts))
    np.maximum.at(block_ends, block_ids, reach)
    return block_starts, block_ends


def covered_us(blocks: tuple[np.ndarray, np.ndarray], at: np.ndarray) -> np.ndarray:
    """Length of ``blocks`` before each time of ``at``."""
    bs, be = blocks
    if len(bs) == 0:
        return np.zeros(len(at))
    before = np.concatenate([[0.0], np.cumsum(be - bs)])
    i = np.searchsorted(bs, at, side="right")
    inside = np.clip(at - bs[np.maximum(i - 1, 0)], 0.0, (be - bs)[np.maximum(i - 1, 0)])
    return before[np.maximum(i - 1, 0)] + np.where(i > 0, inside, 0.0)


def overlap_us(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two sets of disjoint blocks."""
    starts, ends = a
    if len(starts) == 0:
        return 0.0
    return float(np.sum(covered_us(b, ends) - covered_us(b, starts)))


def _nccl_exposure(
    kinds: np.ndarray, starts: np.ndarray, ends: np.ndarray, lo: float, hi: float
) -> tuple[float, float]:
    """(NCCL kernels' union, of which overlapped by compute kernels), in µs."""
    nccl = kinds == KINDS.index("nccl_kernel")
    compute = kinds == KINDS.index("kernel")
    comm = merged_blocks(starts[nccl], ends[nccl], lo, hi)
    busy = float(np.sum(comm[1] - comm[0]))
    return busy, overlap_us(comm, merged_blocks(starts[compute], ends[compute], lo, hi))


def gpu_activity(
    rank: int, parts: list[tuple[GpuScan, float]], window_us: tuple[float, float] | None
) -> GpuActivity | None:
    """The activity of one rank's files, each ``(scan, offset_us)`` moved by its offset into
    the time base of ``window_us``; None when no file has device events (a CPU-only trace)."""
    counts: dict[str, int] = {}
    times: dict[str, float] = {}
    for scan, _ in parts:
        for kind, n in scan.counts.items():
            counts[kind] = counts.get(kind, 0) + n
        for kind, t in scan.time_us.items():
            times[kind] = times.get(kind, 0.0) + t
    if not counts:
        return None
    starts = np.concatenate([np.frombuffer(s.starts_us, dtype=np.float64) + o for s, o in parts])
    ends = np.concatenate([np.frombuffer(s.ends_us, dtype=np.float64) + o for s, o in parts])
    lo, hi = window_us if window_us is not None else (float(starts.min()), float(ends.max()))
    busy = busy_union_us(starts, ends, lo, hi)
    window = max(hi - lo, 0.0)
    kinds = np.concatenate([np.frombuffer(s.kinds, dtype=np.int8) for s, _ in parts])
    comm, overlapped = _nccl_exposure(kinds, starts, ends, lo, hi)
    return GpuActivity(
        rank=rank,
        kernels=counts.get("kernel", 0),
        kernel_ms=times.get("kernel", 0.0) / 1e3,
        nccl_kernels=counts.get("nccl_kernel", 0),
        nccl_kernel_ms=times.get("nccl_kernel", 0.0) / 1e3,
        memcpys=counts.get("memcpy", 0),
        memcpy_ms=times.get("memcpy", 0.0) / 1e3,
        memcpy_bytes=sum(s.memcpy_bytes for s, _ in parts),
        memsets=counts.get("memset", 0),
        memset_ms=times.get("memset", 0.0) / 1e3,
        window_ms=window / 1e3,
        busy_ms=busy / 1e3,
        idle_pct=100.0 * (1.0 - busy / window) if window > 0 else 0.0,
        nccl_busy_ms=comm / 1e3,
        nccl_exposed_ms=(comm - overlapped) / 1e3,
        nccl_overlap_pct=100.0 * overlapped / comm if comm > 0 else None,
    )
