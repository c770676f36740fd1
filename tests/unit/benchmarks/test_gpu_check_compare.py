"""gpu_check's comparisons as pure functions: made-up figures at and around each limit, and
the real figures of a recorded smoke run where the check reads scalescope's JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from gpucheck import compare  # noqa: E402
from gpucheck.check_cores import tune_ratio  # noqa: E402
from gpucheck.results import FAIL, INFO, PASS  # noqa: E402


def test_rel_diff_pct():
    assert compare.rel_diff_pct(102.0, 100.0) == pytest.approx(2.0)
    assert compare.rel_diff_pct(95.0, 100.0) == pytest.approx(-5.0)
    with pytest.raises(ValueError):
        compare.rel_diff_pct(1.0, 0.0)


@pytest.mark.parametrize(
    ("probe", "workload", "status"),
    [(1000.0, 1000.0, PASS), (1019.9, 1000.0, PASS), (980.5, 1000.0, PASS),
     (1020.5, 1000.0, FAIL), (979.0, 1000.0, FAIL)],
)  # fmt: skip
def test_clock_agreement_limit(probe, workload, status):
    result = compare.clock_agreement(probe, workload)
    assert result.status == status and result.check == "2.clock"
    assert f"{probe:,.1f}" in result.figure and "images/s" in result.figure
    assert result.data["diff_pct"] == pytest.approx(100 * (probe / workload - 1))


def test_overhead_ratio_uses_medians_of_interleaved_runs():
    on, off = [99.0, 101.0, 100.0], [100.0, 100.5, 99.5]
    result = compare.overhead_ratio(on, off)
    assert result.data["ratio"] == pytest.approx(100.0 / 100.0)
    assert result.status == PASS
    slow = compare.overhead_ratio([97.0, 98.0, 98.5], off)
    assert slow.status == FAIL and slow.data["ratio"] == pytest.approx(98.0 / 100.0)
    assert "0.980" in slow.figure
    with pytest.raises(ValueError):
        compare.overhead_ratio([], off)


def test_phase_sum_within_five_percent():
    phases = {"data": 1.0, "forward": 30.0, "backward": 55.0, "comm_wait": 4.0, "optimizer": 6.0}
    assert compare.phase_sum(phases, 100.0).status == PASS  # 96 of 100 ms: -4 %
    result = compare.phase_sum(phases, 102.0)  # -5.9 %
    assert result.status == FAIL and "96.00 ms vs step 102.00 ms" in result.figure
    # a GPU run timed on the host: forward only queues kernels, the step waits for them
    host_timed = {"data": 0.2, "forward": 4.0, "backward": 9.0, "optimizer": 1.0}
    assert compare.phase_sum(host_timed, 80.0).status == FAIL


def test_memory_agreement():
    mib = 2**20
    assert compare.memory_agreement(4000 * mib, 4000 * mib).status == PASS
    assert compare.memory_agreement(4100 * mib, 4000 * mib).status == PASS  # +2.5 %
    result = compare.memory_agreement(3000 * mib, 4000 * mib)
    assert result.status == FAIL and "3,000.0 MiB" in result.figure


def sizes_report(rows: list[tuple[str, int, float, float]]) -> dict:
    return {"collectives": {"sizes": [
        {"op": op, "nbytes": n, "calls_per_rank": c, "time_avg_us": t} for op, n, c, t in rows
    ]}}  # fmt: skip


def test_size_rows_keep_one_op():
    report = sizes_report([("all_reduce", 4096, 10, 50.0), ("broadcast", 4096, 1, 9.0)])
    assert list(compare.size_rows(report)) == [4096]
    assert compare.size_rows({"collectives": None}) == {}


def test_counts_exact():
    rows = compare.size_rows(
        sizes_report([("all_reduce", 8, 1, 5.0), ("all_reduce", 4096, 20, 50.0)])
    )
    assert compare.counts_exact("3.x.probe", rows, {8: 1, 4096: 20}).status == PASS
    short = compare.counts_exact("3.x.probe", rows, {8: 1, 4096: 21})
    assert short.status == FAIL and "4096 B: 20 calls, expected 21" in short.figure
    extra = compare.counts_exact("3.x.trace", rows, {4096: 20})
    assert extra.status == FAIL and "sizes never issued: [8]" in extra.figure
    missing = compare.counts_exact("3.x.trace", rows, {4096: 20, 65536: 20, 8: 1})
    assert missing.status == FAIL and "65536 B: None calls" in missing.figure


def test_times_agree_per_size():
    probe = compare.size_rows(
        sizes_report([("all_reduce", 4096, 20, 54.5), ("all_reduce", 1 << 20, 20, 400.0)])
    )
    trace = compare.size_rows(
        sizes_report([("all_reduce", 4096, 20, 50.0), ("all_reduce", 1 << 20, 20, 410.0)])
    )
    ok = compare.times_agree("3.x.time", probe, trace)
    assert ok.status == PASS and ok.data["worst_pct"] == pytest.approx(9.0)
    trace_fast = {**trace, 4096: {**trace[4096], "time_avg_us": 45.0}}
    bad = compare.times_agree("3.x.time", probe, trace_fast)
    assert bad.status == FAIL and bad.data["sizes"][4096]["diff_pct"] == pytest.approx(
        100 * (54.5 / 45 - 1)
    )
    assert compare.times_agree("3.x.time", probe, {}).status == FAIL


def gpu_row(**over):
    row = {"rank": 0, "kernels": 2679, "kernel_ms": 115.7, "nccl_kernels": 21,
           "nccl_kernel_ms": 46.9, "memcpys": 960, "memcpy_ms": 2.3,
           "memcpy_bytes": 307323096, "memsets": 114, "memset_ms": 0.4, "window_ms": 667.2,
           "busy_ms": 157.5, "idle_pct": 76.4}  # fmt: skip
    return row | over


def test_gpu_rows():
    result = compare.gpu_rows([gpu_row()])
    assert result.status == PASS and "GPU idle 76.4 % of 667.2 ms" in result.figure
    no_nccl = compare.gpu_rows([gpu_row(nccl_kernels=0)], ranks=2)
    assert no_nccl.status == FAIL and "none of: NCCL kernels" in no_nccl.figure
    one_rank = compare.gpu_rows([gpu_row(nccl_kernels=0)], ranks=1)
    assert one_rank.status == PASS and "one rank: none required" in one_rank.figure
    no_copies = compare.gpu_rows([gpu_row(memcpys=0)], ranks=1)
    assert no_copies.status == FAIL and "none of: memcpy" in no_copies.figure
    assert compare.gpu_rows([]).status == FAIL


def test_only_nccl_across_gpus_times_the_same_call_as_the_trace():
    from gpucheck.check_comm import GPU_CASES, SMOKE_CASES, CommCase, judged

    assert not any(judged(c) for c in (*GPU_CASES, *SMOKE_CASES))  # one GPU: INFO
    assert judged(CommCase("3.nccl", "nccl", "cuda", 2))


def test_env_facts_gpu_and_cpu():
    doc = {
        "software": {"cuda": "13.0", "nccl": "2.27.3", "torch": "2.14.1"},
        "hardware": {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "driver": "570.86.15"}],
                     "cpu_model": "Xeon", "physical_cores": 16},
        "gpu_peaks": [{"catalogue": "h100", "peak_tflops": {"fp32": 67.0}}],
    }  # fmt: skip
    gpu = compare.env_facts(doc, "cuda")
    assert gpu.status == PASS and "driver 570.86.15" in gpu.figure and "nccl 2.27.3" in gpu.figure
    no_driver = {
        **doc,
        "hardware": {**doc["hardware"], "gpus": [{"name": "X"}]},
        "gpu_peaks": [None],
    }
    bad = compare.env_facts(no_driver, "cuda")
    assert bad.status == FAIL and "missing: driver, peak_fp32_tflops" in bad.figure
    assert compare.env_facts(doc, "cpu").status == PASS
    assert compare.env_facts({"software": {}, "hardware": {}}, "cuda").status == FAIL


def test_scale_tune_validate_and_projection():
    points = [{"ranks": 1, "status": "ok", "samples_per_s": 50.0},
              {"ranks": 2, "status": "failed", "samples_per_s": None}]  # fmt: skip
    scale = compare.scale_points(points, (1, 2))
    assert scale.status == FAIL and "not completed: [2]" in scale.figure
    assert compare.speedup(1.31, "1.3, 1.32").status == PASS
    assert compare.speedup(1.29, "1.2, 1.4").status == FAIL
    held = {"ranks": 8, "predicted_samples_per_s": 110.0, "measured_samples_per_s": 100.0,
            "error_pct": 10.0}  # fmt: skip
    doc = {"fitted_ranks": [1, 2, 4], "held_out": [held], "max_abs_error_pct": 10.0}
    assert compare.validation(doc).status == PASS
    assert compare.validation({**doc, "max_abs_error_pct": 16.0}).status == FAIL
    proj = compare.projection_ratio(2500.0, 2000.0, "h100")
    assert (
        proj.status == INFO and proj.data["ratio"] == pytest.approx(1.25) and "1.250" in proj.figure
    )


def test_tune_ratio_line():
    log = "pair 1/2 ...\nratio tuned / torchrun: 1.412 (pairs 1.38, 1.44)\ntune's speedup ..."
    assert tune_ratio(log) == (1.412, "1.38, 1.44")
    assert tune_ratio("no such line") is None


def test_times_on_the_cpu_are_figures_not_a_verdict():
    probe = compare.size_rows(sizes_report([("all_reduce", 4096, 5, 11748.3)]))
    trace = compare.size_rows(sizes_report([("all_reduce", 4096, 5, 2478.8)]))
    result = compare.times_agree("3.gloo-cpu.time", probe, trace, judged=False)
    assert result.status == INFO and "the trace times gloo's work" in result.figure
    assert result.data["worst_pct"] == pytest.approx(100 * (11748.3 / 2478.8 - 1))


@pytest.mark.parametrize(
    ("projected", "status"), [(1_000.0, "PASS"), (1_249.0, "PASS"), (751.0, "PASS"),
                              (1_251.0, "FAIL"), (749.0, "FAIL")],
)  # fmt: skip
def test_another_models_projection_is_held_to_25_percent(projected, status):
    result = compare.model_projection(projected, 1_000.0, "resnet50", "resnet18")
    assert result.check == "6.model" and result.status == status
    assert "calibrated on resnet50" in result.figure and "limit ±25 %" in result.figure
