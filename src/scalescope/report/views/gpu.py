"""``scalescope analyze`` of a Kineto trace with device events: the GPU's time by kind and
its idle share, one row per rank."""

from __future__ import annotations

from rich.console import Console

from scalescope.events.units import fmt_bytes
from scalescope.ingest import IngestResult
from scalescope.report.document import Column, Document, Table
from scalescope.report.media.terminal import render_document

COLUMNS = tuple(
    Column(name)
    for name in (
        "rank", "kernels", "kernel ms", "NCCL kernels", "NCCL ms", "memcpy", "memcpy ms",
        "memcpy bytes", "memset", "window ms", "busy ms", "idle %", "NCCL exposed ms",
        "NCCL overlap %",
    )
)  # fmt: skip


def gpu_table(result: IngestResult) -> Table:
    rows = tuple(
        (
            str(g.rank), str(g.kernels), f"{g.kernel_ms:.2f}", str(g.nccl_kernels),
            f"{g.nccl_kernel_ms:.2f}", str(g.memcpys), f"{g.memcpy_ms:.2f}",
            fmt_bytes(g.memcpy_bytes), str(g.memsets), f"{g.window_ms:.2f}",
            f"{g.busy_ms:.2f}", f"{g.idle_pct:.1f}", f"{g.nccl_exposed_ms:.2f}",
            "–" if g.nccl_overlap_pct is None else f"{g.nccl_overlap_pct:.1f}",
        )
        for g in result.gpu
    )  # fmt: skip
    values = tuple(
        (
            g.rank, g.kernels, g.kernel_ms, g.nccl_kernels, g.nccl_kernel_ms, g.memcpys,
            g.memcpy_ms, g.memcpy_bytes, g.memsets, g.window_ms, g.busy_ms, g.idle_pct,
            g.nccl_exposed_ms, g.nccl_overlap_pct,
        )
        for g in result.gpu
    )  # fmt: skip
    title = (
        "GPU activity (kernels, copies and NCCL kernels; idle = window not busy; NCCL exposed "
        "= no compute kernel beside it)"
    )
    return Table(title, COLUMNS, rows, values)


def gpu_document(result: IngestResult) -> Document:
    """The table, only when the trace has device events."""
    return Document("GPU activity", (gpu_table(result),) if result.gpu else ())


def render_gpu_activity(result: IngestResult, console: Console) -> None:
    render_document(gpu_document(result), console)
