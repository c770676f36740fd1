"""``scalescope analyze`` of a Kineto trace with device events: the GPU's time by kind and
its idle share, one row per rank."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from scalescope.ingest import IngestResult
from scalescope.report.formatting import fmt_bytes

COLUMNS = (
    "rank", "kernels", "kernel ms", "NCCL kernels", "NCCL ms", "memcpy", "memcpy ms",
    "memcpy bytes", "memset", "window ms", "busy ms", "idle %",
)  # fmt: skip


def gpu_table(result: IngestResult) -> Table:
    table = Table(
        title="GPU activity (kernels, copies and NCCL kernels; idle = window not busy)",
        title_justify="left",
    )
    for name in COLUMNS:
        table.add_column(name, justify="right")
    for g in result.gpu:
        table.add_row(
            str(g.rank), str(g.kernels), f"{g.kernel_ms:.2f}", str(g.nccl_kernels),
            f"{g.nccl_kernel_ms:.2f}", str(g.memcpys), f"{g.memcpy_ms:.2f}",
            fmt_bytes(g.memcpy_bytes), str(g.memsets), f"{g.window_ms:.2f}",
            f"{g.busy_ms:.2f}", f"{g.idle_pct:.1f}",
        )  # fmt: skip
    return table


def render_gpu_activity(result: IngestResult, console: Console) -> None:
    """The table, only when the trace has device events."""
    if result.gpu:
        console.print(gpu_table(result))
