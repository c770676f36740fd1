"""Input pipeline: the steps wait for the DataLoader."""

from __future__ import annotations

import math
import shlex

from scalescope.diagnose.findings import (
    Evidence,
    Finding,
    bottleneck,
    remedy,
    summary,
)
from scalescope.diagnose.rules_input import (
    DiagnosisInput,
    bench_option,
    host_cores,
    hosts,
    mean_phase,
    mean_step,
    rank_threads,
    rank_times,
    share_pct,
)
from scalescope.events.units import fmt_bytes_decimal


def _spare_cores(ctx: DiagnosisInput) -> int | None:
    """Physical cores of the busiest host not taken by the ranks' compute threads."""
    spare = []
    for ranks in hosts(ctx).values():
        threads = [rank_threads(r) for r in ranks]
        cores = host_cores(ranks, ctx.meta.hardware)
        if cores is None or any(t is None for t in threads):
            return None
        spare.append(cores - sum(t or 0 for t in threads))
    return max(min(spare), 0) if spare else None


def loader_workers(ctx: DiagnosisInput) -> int | None:
    """Workers per rank the bench's loader ran with (bench.json), else as asked."""
    ran = ((ctx.bench or {}).get("options") or {}).get("workers")
    return ran if isinstance(ran, int) else bench_option(ctx, "workers")


def _many_small_files(ctx: DiagnosisInput) -> bool:
    files, t = ctx.data_files, ctx.thresholds
    return bool(files and files.files >= t.many_files and files.mean_bytes < t.small_file_bytes)


def _remedies(ctx: DiagnosisInput, data_ms: float, step_ms: float) -> tuple[str, ...]:
    workers = loader_workers(ctx)
    needed = max(1, math.ceil(data_ms / max(step_ms - data_ms, 1e-3)))
    out = []
    if workers:
        out.append(remedy("more_workers", n=workers))
    else:
        out.append(remedy("workers", n=needed))
    spare = _spare_cores(ctx)
    if spare is not None and spare < needed:
        out.append(remedy("worker_cores", spare=spare))
    out.append(remedy("cheaper_samples"))
    files = ctx.data_files
    if files and _many_small_files(ctx):
        size, folder = fmt_bytes_decimal(files.mean_bytes), shlex.quote(files.path)
        out.append(remedy("pack_files", files=files.files, size=size, folder=folder))
    if ctx.meta.hardware.get("gpus") and not bench_option(ctx, "pin_memory"):
        out.append(remedy("pin_memory"))
    return tuple(out)


def _evidence(ctx: DiagnosisInput, share: float, data_ms: float) -> tuple[Evidence, ...]:
    t = ctx.thresholds
    out = [
        Evidence("data wait", round(share, 1), "% of step time", t.data_share_pct, ">="),
        Evidence("data wait per step", round(data_ms, 1), "ms"),
    ]
    workers = loader_workers(ctx)
    if workers is not None:
        out.append(Evidence("loader workers per rank", workers))
    spare = _spare_cores(ctx)
    if spare is not None:
        out.append(Evidence("cores not used by compute threads", spare))
    if ctx.data_files:
        files = ctx.data_files
        many = _many_small_files(ctx)
        out += [
            Evidence("image files" if files.complete else "image files (at least)",
                     files.files, "", t.many_files if many else None,
                     ">=" if many else ""),
            Evidence("mean file size", round(files.mean_bytes / 1e3, 1), "kB",
                     t.small_file_bytes / 1e3 if many else None, "<" if many else ""),
        ]  # fmt: skip
    return tuple(out)


class InputRule:
    """Input-bound: the data phase takes ``data_share_pct`` or more of the step.

    Saving: the data wait per step; loader workers on cores of their own hide all of it
    when they produce batches as fast as the step consumes them (``workers`` remedy)."""

    name = "input pipeline"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        times = rank_times(ctx.analysis)
        if not times:
            return (f"{self.name}: no step timing was recorded",)
        if mean_phase(times, "data") is None:
            return (f"{self.name}: the data phase (waiting for the DataLoader) was not recorded",)
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        times = rank_times(ctx.analysis)
        data_ms, step_ms = mean_phase(times, "data"), mean_step(times)
        if data_ms is None or not step_ms:
            return None
        share = share_pct(data_ms, step_ms)
        if share < ctx.thresholds.data_share_pct:
            return None
        return Finding(
            code="INPUT_BOUND",
            bottleneck=bottleneck("INPUT_BOUND"),
            summary=summary("INPUT_BOUND", share=share),
            share_pct=share,
            saved_ms_per_step=data_ms,
            evidence=_evidence(ctx, share, data_ms),
            remedies=_remedies(ctx, data_ms, step_ms),
            basis="the data wait per step, all of which prefetching workers can hide",
        )
