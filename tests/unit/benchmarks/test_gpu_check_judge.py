"""How checks 2 and 3 read scalescope's JSON: which fields they compare (report --json of the
probe's run, bench.json of the workload, analyze --json of the trace; docs/report-schema.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from gpucheck import compare  # noqa: E402
from gpucheck.check_bench import BenchRun, judge  # noqa: E402
from gpucheck.check_comm import CommCase, Records  # noqa: E402
from gpucheck.check_comm import judge as judge_comm  # noqa: E402
from gpucheck.check_copies import batch_bytes, trace_copies  # noqa: E402
from gpucheck.check_copies import judge as judge_copies  # noqa: E402
from gpucheck.check_cost import judge_cost  # noqa: E402
from gpucheck.plan import FULL, SMOKE  # noqa: E402

MIB = 2**20


def report(samples_per_s: float, phases: dict[str, float], peaks: list[int]) -> dict:
    rows = [{"phase": p, "mean_ms": ms} for p, ms in phases.items()]
    memory = [{"name": "cuda_max_allocated", "peak_bytes": b} for b in peaks]
    return {"steps": {"samples_per_s": samples_per_s,
                      "ranks": [{"phases": rows, "memory": memory}]}}  # fmt: skip


PHASES = {"data": 1.0, "forward": 30.0, "backward": 60.0, "optimizer": 7.0, "other": 2.0,
          "step": 100.0}  # fmt: skip


def runs(probe_ips: float, torch_peak: int | None) -> tuple[list[BenchRun], list[BenchRun]]:
    on = [BenchRun(Path("a"), {"images_per_sec": 1000.0},
                   report(probe_ips, PHASES, [3000 * MIB, 4000 * MIB]))]  # fmt: skip
    off = [BenchRun(Path("b"), {"images_per_sec": 1005.0,
                                "cuda_max_memory_allocated": torch_peak}, None)]  # fmt: skip
    return on, off


def test_bench_judge_on_cuda():
    clock, overhead, phases, memory = judge(FULL, *runs(1010.0, 4000 * MIB))
    assert clock.status == "PASS" and clock.data["probe"] == 1010.0
    assert clock.data["workload"] == 1000.0
    assert overhead.data["ratio"] == pytest.approx(1000.0 / 1005.0) and overhead.status == "PASS"
    # other and step are not phases: 1 + 30 + 60 + 7 = 98 of the 100 ms step
    assert phases.data["phases_ms"] == {"data": 1.0, "forward": 30.0, "backward": 60.0,
                                        "optimizer": 7.0}  # fmt: skip
    assert phases.data["diff_pct"] == pytest.approx(-2.0)
    # the probe's peak is the largest step's
    assert memory.data == {"probe_bytes": 4000 * MIB, "torch_bytes": 4000 * MIB, "diff_pct": 0.0}


def test_bench_judge_without_figures_skips_memory():
    *_, memory = judge(FULL, *runs(1010.0, None))
    assert memory.status == "SKIP" and "no cuda_max_allocated row" in memory.reason
    *_, cpu = judge(SMOKE, *runs(1010.0, None))
    assert cpu.status == "SKIP" and cpu.reason == "CPU smoke: no device memory to compare"


def sizes(rows: list[tuple[int, float, float]]) -> dict:
    return {"collectives": {"sizes": [
        {"op": "all_reduce", "nbytes": n, "calls_per_rank": c, "time_avg_us": t}
        for n, c, t in rows
    ]}}  # fmt: skip


def test_comm_judge_counts_the_probes_warmup_call_and_not_the_traces():
    case = CommCase("3.nccl", "nccl", "cuda", 2)  # judged: NCCL across GPUs
    probe = sizes([(8, 1, 900.0), (4096, 20, 30.0), (1 << 20, 20, 80.0)])
    trace = sizes([(4096, 20, 28.0), (1 << 20, 20, 79.0)])
    counted, traced, timed = judge_comm(case, Records(probe, trace), (4096, 1 << 20), 20)
    assert (counted.status, traced.status) == ("PASS", "PASS")
    assert timed.status == "PASS" and set(timed.data["sizes"]) == {4096, 1 << 20}
    lost = sizes([(4096, 20, 30.0), (1 << 20, 19, 80.0)])
    counted, *_ = judge_comm(case, Records(lost, trace), (4096, 1 << 20), 20)
    assert counted.status == "FAIL" and "8 B: None calls, expected 1" in counted.figure


def gpu_row(cat: str, name: str, ts: float, dur: float, corr: int, nbytes: int = 0) -> dict:
    args = {"stream": 7, "correlation": corr, "bytes": nbytes}
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}


def call_row(ts: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": ts, "dur": 9.0,
            "args": {"correlation": corr}}  # fmt: skip


def step_events(t: float, batch: int, corr: int) -> list[dict]:
    """A kernel of the step before, then the two pageable copies: the images' asked for
    1 ms before the kernel ends and staged 3 ms after that, the labels' right after."""
    h2d = "Memcpy HtoD (Pageable -> Device)"
    return [
        gpu_row("kernel", "sgemm", t, 2000.0, corr),
        call_row(t + 1000.0, corr + 1),
        gpu_row("gpu_memcpy", h2d, t + 5000.0, 5000.0, corr + 1, batch - 512),
        call_row(t + 10010.0, corr + 2),
        gpu_row("gpu_memcpy", h2d, t + 10020.0, 1.0, corr + 2, 512),
        gpu_row("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", t + 10100.0, 5.0, corr + 3, 4),
    ]


def test_copies_judge_reads_the_report_and_the_traces_host_to_device_copies(tmp_path):
    batch = batch_bytes(FULL)
    assert batch == 64 * 3 * 224 * 224 * 4 + 64 * 8
    events = step_events(0.0, batch, 0) + step_events(60_000.0, batch, 10)
    (tmp_path / "rank0.pt.trace.json").write_text(json.dumps({"traceEvents": events}))
    trace = trace_copies(tmp_path, steps=2)
    assert trace.nbytes == batch
    assert trace.dma_ms == pytest.approx(5.001)
    assert trace.asked_ms == pytest.approx(8.0 + 0.011), "from the stream free to the end"
    probe = {"copies": [{"nbytes_per_step": batch, "ms_per_step": 8.5}]}
    size, time = judge_copies(probe, trace, batch)
    assert (size.status, time.status) == ("PASS", "PASS")
    assert "+6.1 %" in time.figure and "DMA alone 5.001 ms" in time.figure
    dma_only = {"copies": [{"nbytes_per_step": batch, "ms_per_step": 5.0}]}
    assert [r.status for r in judge_copies(dma_only, trace, batch)] == ["PASS", "FAIL"]
    assert [r.status for r in judge_copies({"copies": []}, trace, batch)] == ["FAIL", "FAIL"]


def test_the_phase_sum_counts_the_copies():
    phases = {"data": 1.0, "to_device": 8.0, "forward": 30.0, "backward": 55.0, "optimizer": 5.0}
    result = compare.phase_sum(phases, 100.0)
    assert result.status == "PASS" and "to_device 8.00" in result.figure


COST = {
    "all_reduce_us": {"off": 20.0, "probe": 21.5, "dispatcher": 21.5, "wrappers": 28.25},
    "probe_way": "c10d ops at the dispatcher (C++)",
    "torch": "2.11.0+cu128",
    "backend": "nccl",
}


def test_cost_judges_the_probes_own_way_against_2_us():
    result = judge_cost("3.nccl.cost", COST, judged=True)
    assert result.status == "PASS"
    assert result.data["added_us"] == {"probe": 1.5, "dispatcher": 1.5, "wrappers": 8.25}
    assert result.figure == (
        "c10d ops at the dispatcher (C++): +1.50 µs a call (20.00 µs without; <= 2 µs); "
        "c10d ops at the dispatcher +1.50 µs, dist.* wrappers +8.25 µs; torch 2.11.0+cu128, nccl"
    )
    dear = COST | {"all_reduce_us": COST["all_reduce_us"] | {"probe": 22.5}}
    assert judge_cost("3.nccl.cost", dear, judged=True).status == "FAIL"
    assert judge_cost("3.gloo-cpu.cost", dear, judged=False).status == "INFO"
