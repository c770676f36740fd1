"""GPU activity of Kineto traces: counts, device time and idle share, checked against sums
and a union computed here from the JSON by a plain loop (not the ingester's code)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from scalescope.ingest import ingest
from scalescope.ingest.kineto_gpu import busy_union_us

TRACES = next(
    (p / "shared" / "traces" for p in Path(__file__).resolve().parents if (p / "shared").is_dir()),
    Path("../shared/traces"),
)
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"no real traces at {TRACES}")


def union_by_loop(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    total, end = 0.0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if e <= s:
            continue
        if s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def test_busy_union_of_overlapping_streams() -> None:
    import numpy as np

    # two streams: [0,10) and [5,12) overlap; [20,25) alone; [30,40) clipped at 35
    starts, ends = np.array([0.0, 5.0, 20.0, 30.0]), np.array([10.0, 12.0, 25.0, 40.0])
    assert busy_union_us(starts, ends, 0.0, 35.0) == pytest.approx(12 + 5 + 5)
    assert busy_union_us(starts, ends, 11.0, 21.0) == pytest.approx(1 + 1)
    assert busy_union_us(np.array([]), np.array([]), 0.0, 1.0) == 0.0


def test_busy_union_matches_a_plain_loop_on_random_intervals() -> None:
    import numpy as np

    rng = random.Random(7)
    for _ in range(50):
        pairs = [(s := rng.uniform(0, 100), s + rng.uniform(0, 15)) for _ in range(40)]
        lo, hi = rng.uniform(-5, 30), rng.uniform(60, 110)
        starts = np.array([s for s, _ in pairs])
        ends = np.array([e for _, e in pairs])
        assert busy_union_us(starts, ends, lo, hi) == pytest.approx(union_by_loop(pairs, lo, hi))


def write_trace(path: Path, events: list[dict]) -> Path:
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 0}}))
    return path


def test_made_up_trace_counts_and_idle(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 0, "dur": 100,
         "pid": 1, "tid": 1},
        {"ph": "X", "cat": "kernel", "name": "volta_sgemm", "ts": 10, "dur": 20, "pid": 0,
         "tid": 7},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32", "ts": 20,
         "dur": 30, "pid": 0, "tid": 9, "args": {"External id": 5}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 60,
         "dur": 5, "pid": 0, "tid": 7, "args": {"bytes": 4096}},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 90, "dur": 20,
         "pid": 0, "tid": 7},
    ]  # fmt: skip
    (gpu,) = ingest(write_trace(tmp_path / "rank0.json", events)).gpu
    assert (gpu.kernels, gpu.nccl_kernels, gpu.memcpys, gpu.memsets) == (1, 1, 1, 1)
    assert gpu.memcpy_bytes == 4096
    assert gpu.nccl_kernel_ms == pytest.approx(0.030)
    # busy inside the step [0,100): [10,50) + [60,65) + [90,100) = 55 us
    assert gpu.window_ms == pytest.approx(0.100)
    assert gpu.busy_ms == pytest.approx(0.055)
    assert gpu.idle_pct == pytest.approx(45.0)


def test_cpu_only_trace_has_no_gpu_activity(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5, "pid": 1,
               "tid": 1}]  # fmt: skip
    assert ingest(write_trace(tmp_path / "rank0.json", events)).gpu == ()


@needs_traces
def test_real_a100_nccl_trace() -> None:
    path = TRACES / "hta_nccl_data_rank0.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    device = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    kernels = [e for e in device if e.get("cat") == "kernel"]
    nccl = [e for e in kernels if e["name"].startswith("nccl")]
    copies = [e for e in device if e.get("cat") == "gpu_memcpy"]
    sets = [e for e in device if e.get("cat") == "gpu_memset"]
    steps = [e for e in device if e["name"].startswith("ProfilerStep#")]
    lo = min(e["ts"] for e in steps)
    hi = max(e["ts"] + e["dur"] for e in steps)
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in kernels + copies + sets]
    (gpu,) = ingest(path).gpu
    assert gpu.kernels == len(kernels) - len(nccl) and gpu.nccl_kernels == len(nccl) > 0
    assert gpu.memcpys == len(copies) > 0 and gpu.memsets == len(sets)
    assert gpu.memcpy_bytes == sum(e["args"]["bytes"] for e in copies)
    assert gpu.nccl_kernel_ms == pytest.approx(sum(e["dur"] for e in nccl) / 1e3)
    assert gpu.window_ms == pytest.approx((hi - lo) / 1e3)
    assert gpu.busy_ms == pytest.approx(union_by_loop(spans, lo, hi) / 1e3)
    assert gpu.idle_pct == pytest.approx(100 * (1 - gpu.busy_ms / gpu.window_ms))


def overlap_by_sweep(
    comm: list[tuple[float, float]], compute: list[tuple[float, float]], lo: float, hi: float
) -> tuple[float, float]:
    """(time some NCCL kernel runs, of which some compute kernel runs too) in [lo, hi), by a
    sweep over every boundary."""
    marks = sorted({lo, hi, *(t for s, e in comm + compute for t in (s, e) if lo < t < hi)})
    busy = both = 0.0
    for a, b in zip(marks, marks[1:], strict=False):
        mid = (a + b) / 2
        talking = any(s <= mid < e for s, e in comm)
        if talking:
            busy += b - a
            both += (b - a) if any(s <= mid < e for s, e in compute) else 0.0
    return busy, both


def test_made_up_trace_exposed_communication(tmp_path: Path) -> None:
    """NCCL [20,50) and [70,80) beside compute [10,30) and [25,40) on other streams: 20 of
    the 40 us of communication overlap compute, 20 are exposed."""

    def kernel(name: str, ts: float, dur: float, tid: int) -> dict:
        return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0,
                "tid": tid}  # fmt: skip

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 0, "dur": 100,
         "pid": 1, "tid": 1},
        kernel("volta_sgemm", 10, 20, 7), kernel("volta_sgemm", 25, 15, 8),
        kernel("ncclDevKernel_AllReduce_Sum_f32", 20, 30, 9),
        kernel("ncclDevKernel_AllReduce_Sum_f32", 70, 10, 9),
    ]  # fmt: skip
    (gpu,) = ingest(write_trace(tmp_path / "rank0.json", events)).gpu
    assert gpu.nccl_busy_ms == pytest.approx(0.040)
    assert gpu.nccl_exposed_ms == pytest.approx(0.020)
    assert gpu.nccl_overlap_pct == pytest.approx(50.0)


@needs_traces
@pytest.mark.parametrize("name", ["hta_nccl_data_rank0.json.gz", "hta_sampled_rank-1.json.gz"])
def test_real_traces_exposed_communication_against_a_sweep(name: str) -> None:
    """HTA's real traces: the NCCL kernels' time overlapped by compute kernels (HTA's
    comm_comp_overlap) against a sweep over the JSON's own events."""
    path = TRACES / name
    doc = json.loads(gzip.decompress(path.read_bytes()))
    device = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    kernels = [e for e in device if e.get("cat") == "kernel"]
    is_nccl = [e["name"][:64].lower().find("nccl") >= 0 for e in kernels]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e, n in zip(kernels, is_nccl, strict=True) if n]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e, n in zip(kernels, is_nccl, strict=True)
               if not n]  # fmt: skip
    steps = [e for e in device if e["name"].startswith("ProfilerStep#")]
    lo = min(e["ts"] for e in steps) if steps else min(s for s, _ in comm + compute)
    hi = max(e["ts"] + e["dur"] for e in steps) if steps else max(e for _, e in comm + compute)
    busy, both = overlap_by_sweep(comm, compute, lo, hi)
    (gpu,) = ingest(path).gpu
    assert busy > 0
    assert gpu.nccl_busy_ms == pytest.approx(busy / 1e3)
    assert gpu.nccl_exposed_ms == pytest.approx((busy - both) / 1e3)
    assert gpu.nccl_overlap_pct == pytest.approx(100 * both / busy)
