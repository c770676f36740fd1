"""The comparisons of the checks as pure functions of the figures: each returns a
CheckResult whose figure carries both numbers, their units and the limit."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from gpucheck.results import INFO, CheckResult, verdict

STEP_PHASES = ("data", "to_device", "forward", "backward", "comm_wait", "optimizer")


def rel_diff_pct(a: float, b: float) -> float:
    """(a - b) / b x 100."""
    if b == 0:
        raise ValueError("reference is zero")
    return 100.0 * (a / b - 1.0)


def env_facts(doc: Mapping[str, Any], device: str) -> CheckResult:
    """``scalescope env --json`` names the GPU, driver, CUDA, NCCL and the GPU's peaks
    (``device="cpu"``: the CPU model, torch and the cores, the smoke's analogue)."""
    software, hardware = doc.get("software") or {}, doc.get("hardware") or {}
    if device == "cpu":
        facts = {
            "cpu_model": hardware.get("cpu_model"),
            "torch": software.get("torch"),
            "physical_cores": hardware.get("physical_cores"),
        }
    else:
        gpu = (hardware.get("gpus") or [{}])[0]
        peaks = (doc.get("gpu_peaks") or [None])[0]
        facts = {
            "gpu": gpu.get("name"),
            "driver": gpu.get("driver"),
            "cuda": software.get("cuda"),
            "nccl": software.get("nccl"),
            "peak_fp32_tflops": (peaks or {}).get("peak_tflops", {}).get("fp32"),
        }
    missing = [k for k, v in facts.items() if v in (None, "", [])]
    shown = ", ".join(f"{k} {v}" for k, v in facts.items() if k not in missing)
    figure = shown + (f"; missing: {', '.join(missing)}" if missing else "")
    return verdict("1.env", not missing, figure, **facts)


def clock_agreement(probe_ips: float, workload_ips: float, limit_pct: float = 2.0) -> CheckResult:
    diff = rel_diff_pct(probe_ips, workload_ips)
    figure = (
        f"probe {probe_ips:,.1f} vs workload {workload_ips:,.1f} images/s "
        f"({diff:+.2f} %, limit ±{limit_pct:g} %)"
    )
    return verdict("2.clock", abs(diff) <= limit_pct, figure, probe=probe_ips,
                   workload=workload_ips, diff_pct=diff)  # fmt: skip


def overhead_ratio(
    with_probe: Sequence[float], without: Sequence[float], min_ratio: float = 0.99
) -> CheckResult:
    """Median images/s with the probe over the median without, from interleaved runs."""
    if not with_probe or not without:
        raise ValueError("need runs with and without the probe")
    a, b = statistics.median(with_probe), statistics.median(without)
    pairs = ", ".join(f"{x / y:.3f}" for x, y in zip(with_probe, without, strict=False))
    figure = (
        f"probe on/off {a / b:.3f} (medians {a:,.1f} / {b:,.1f} images/s over "
        f"{len(with_probe)} pairs: {pairs}; limit ≥ {min_ratio:g})"
    )
    return verdict("2.overhead", a / b >= min_ratio, figure, ratio=a / b,
                   with_probe=list(with_probe), without=list(without))  # fmt: skip


def phase_sum(phases: Mapping[str, float], step_ms: float, limit_pct: float = 5.0) -> CheckResult:
    """The recorded phases' mean times add up to the mean step (``other`` small)."""
    total = sum(phases.get(p, 0.0) for p in STEP_PHASES)
    diff = rel_diff_pct(total, step_ms)
    shown = " + ".join(f"{p} {phases[p]:.2f}" for p in STEP_PHASES if p in phases)
    figure = (
        f"{shown} = {total:.2f} ms vs step {step_ms:.2f} ms ({diff:+.1f} %, limit ±{limit_pct:g} %)"
    )
    return verdict("2.phases", abs(diff) <= limit_pct, figure, phases_ms=dict(phases),
                   step_ms=step_ms, diff_pct=diff)  # fmt: skip


def memory_agreement(probe_bytes: int, torch_bytes: int, limit_pct: float = 5.0) -> CheckResult:
    diff = rel_diff_pct(probe_bytes, torch_bytes)
    figure = (
        f"probe peak {probe_bytes / 2**20:,.1f} MiB vs torch.cuda.max_memory_allocated "
        f"{torch_bytes / 2**20:,.1f} MiB ({diff:+.2f} %, limit ±{limit_pct:g} %)"
    )
    return verdict("2.memory", abs(diff) <= limit_pct, figure, probe_bytes=probe_bytes,
                   torch_bytes=torch_bytes, diff_pct=diff)  # fmt: skip


def size_rows(report: Mapping[str, Any], op: str = "all_reduce") -> dict[int, dict[str, Any]]:
    """The report JSON's SizeStats of ``op``, by message size, user collectives only
    summed with the others (the script issues nothing else of that op)."""
    rows = ((report.get("collectives") or {}).get("sizes")) or []
    return {int(r["nbytes"]): r for r in rows if r["op"] == op}


def counts_exact(
    check: str, rows: Mapping[int, Mapping[str, Any]], expected: Mapping[int, int]
) -> CheckResult:
    """Every size issued was recorded with its exact bytes, as many times per rank."""
    wrong = []
    for nbytes, calls in sorted(expected.items()):
        got = rows.get(nbytes)
        got_calls = None if got is None else got["calls_per_rank"]
        if got_calls != calls:
            wrong.append(f"{nbytes} B: {got_calls} calls, expected {calls}")
    extra = sorted(set(rows) - set(expected))
    if extra:
        wrong.append(f"sizes never issued: {extra}")
    n = sum(expected.values())
    figure = (
        f"{n} calls per rank of {len(expected)} sizes counted with exact bytes"
        if not wrong
        else "; ".join(wrong)
    )
    return verdict(check, not wrong, figure, expected=dict(expected))


def times_agree(
    check: str,
    probe: Mapping[int, Mapping[str, Any]],
    trace: Mapping[int, Mapping[str, Any]],
    limit_pct: float = 10.0,
    judged: bool = True,
) -> CheckResult:
    """Mean call time per size, the probe's against the trace's, within ``limit_pct``;
    ``judged=False`` gives the figures as INFO: gloo (on CPU or CUDA tensors), where the
    trace times gloo's own work on its thread (``gloo:all_reduce``) and the probe the call
    from issue to completion, waiting for the peer included; and NCCL with one rank, where
    NCCL runs no kernel and the trace's time is the host call's (about 40 µs whatever the
    size on the H200) while the probe's CUDA events span issue to completion on the stream."""
    parts, worst, per_size = [], 0.0, {}
    for nbytes in sorted(set(probe) & set(trace)):
        a, b = probe[nbytes]["time_avg_us"], trace[nbytes]["time_avg_us"]
        diff = rel_diff_pct(a, b)
        worst = max(worst, abs(diff))
        per_size[nbytes] = {"probe_us": a, "trace_us": b, "diff_pct": diff}
        parts.append(f"{nbytes} B {a:,.1f}/{b:,.1f} µs ({diff:+.1f} %)")
    if not parts:
        return verdict(check, False, "no message size in both the probe's and the trace's record")
    if not judged:
        figure = (
            f"probe/trace mean call: {'; '.join(parts)} (CPU: the trace times gloo's work, "
            "the probe issue to completion)"
        )
        return CheckResult(check, INFO, figure, data={"sizes": per_size, "worst_pct": worst})
    figure = f"probe/trace mean call: {'; '.join(parts)}; limit ±{limit_pct:g} %"
    return verdict(check, worst <= limit_pct, figure, sizes=per_size, worst_pct=worst)


def gpu_rows(gpu: Sequence[Mapping[str, Any]], ranks: int = 1) -> CheckResult:
    """``analyze --json``'s ``ingest.gpu``: kernels, copies and NCCL kernels present, idle share.
    NCCL kernels are required only of two ranks or more: with one rank NCCL 2.28 ran none
    (H200, 2026-11-26: 0 NCCL kernels in 8 DDP steps), it has nothing to exchange."""
    if not gpu:
        return verdict("4.trace", False, "no GPU activity in the trace (no kernel rows)")
    g = gpu[0]
    have = {"kernels": g["kernels"], "memcpy": g["memcpys"]}
    if ranks > 1:
        have["NCCL kernels"] = g["nccl_kernels"]
    missing = [k for k, v in have.items() if not v]
    figure = (
        f"{g['kernels']} kernels, {g['memcpys']} memcpy, {g['nccl_kernels']} NCCL kernels"
        + (" (one rank: none required)" if ranks == 1 else "")
        + f"; GPU idle {g['idle_pct']:.1f} % of {g['window_ms']:.1f} ms"
        + (f"; none of: {', '.join(missing)}" if missing else "")
    )
    return verdict("4.trace", not missing, figure, **dict(g))


def scale_points(points: Sequence[Mapping[str, Any]], sizes: Sequence[int]) -> CheckResult:
    """Every size of the study completed, with its samples/s."""
    done = {p["ranks"]: p for p in points if p.get("status") == "ok"}
    missing = [n for n in sizes if n not in done]
    shown = ", ".join(f"{n}: {done[n]['samples_per_s']:,.1f}" for n in sizes if n in done)
    figure = f"samples/s by ranks {shown}" + (f"; not completed: {missing}" if missing else "")
    return verdict("5.scale", not missing, figure, points=list(points))


def speedup(ratio: float, pairs: str, min_ratio: float = 1.3) -> CheckResult:
    figure = f"tuned / torchrun defaults {ratio:.3f} (pairs {pairs}; limit ≥ {min_ratio:g})"
    return verdict("5.tune", ratio >= min_ratio, figure, ratio=ratio)


def validation(doc: Mapping[str, Any], limit_pct: float = 15.0) -> CheckResult:
    held = doc["held_out"]
    parts = [
        f"{h['ranks']} ranks predicted {h['predicted_samples_per_s']:,.1f} vs measured "
        f"{h['measured_samples_per_s']:,.1f} samples/s ({h['error_pct']:+.1f} %)"
        for h in held
    ]
    worst = doc["max_abs_error_pct"]
    figure = f"fit on {doc['fitted_ranks']}: {'; '.join(parts)}; limit ±{limit_pct:g} %"
    return verdict("5.validate", worst <= limit_pct, figure, max_abs_error_pct=worst)


def projection_ratio(projected: float, measured: float, hardware: str) -> CheckResult:
    """The projection's error on real hardware: a number, not a pass/fail."""
    ratio = projected / measured
    figure = (
        f"projected {projected:,.1f} ({hardware}, from a CPU run) / measured {measured:,.1f} "
        f"images/s = {ratio:.3f}"
    )
    return CheckResult("6.project", INFO, figure, data={"ratio": ratio, "projected": projected,
                                                         "measured": measured})  # fmt: skip


def model_projection(
    projected: float, measured: float, calibrated_on: str, model: str, limit_pct: float = 25.0
) -> CheckResult:
    """Another model projected with the fraction of peak the first reached on this GPU."""
    diff = rel_diff_pct(projected, measured)
    figure = (
        f"{model} projected {projected:,.1f} (calibrated on {calibrated_on}) vs measured "
        f"{measured:,.1f} images/s ({diff:+.1f} %, limit ±{limit_pct:g} %)"
    )
    return verdict("6.model", abs(diff) <= limit_pct, figure, projected=projected,
                   measured=measured, diff_pct=diff)  # fmt: skip


def copy_bytes(probe: float, batch: int, trace: float) -> CheckResult:
    """The probe's ``to_device`` bytes per step are the batch's, and the trace's copies'."""
    figure = (
        f"probe {probe:,.0f} B a step vs the batch's {batch:,} B and the trace's host-to-device "
        f"copies {trace:,.0f} B a step (exact)"
    )
    return verdict("2.copy.bytes", probe == batch == trace, figure, probe=probe, batch=batch,
                   trace=trace)  # fmt: skip


def copy_time(
    probe_ms: float, trace_ms: float, dma_ms: float, limit_pct: float = 10.0
) -> CheckResult:
    """The probe's ``to_device`` time per step against the trace's host-to-device copies,
    asked-to-done (``check_copies.TraceCopies``); their DMA alone is shown beside."""
    if trace_ms <= 0:
        return verdict("2.copy.time", False, "the trace has no host-to-device copy")
    diff = rel_diff_pct(probe_ms, trace_ms)
    figure = (
        f"probe {probe_ms:.3f} vs trace {trace_ms:.3f} ms of copies a step, asked to done "
        f"({diff:+.1f} %, limit ±{limit_pct:g} %; their DMA alone {dma_ms:.3f} ms)"
    )
    return verdict("2.copy.time", abs(diff) <= limit_pct, figure, probe_ms=probe_ms,
                   trace_ms=trace_ms, dma_ms=dma_ms, diff_pct=diff)  # fmt: skip
