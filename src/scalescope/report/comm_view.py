"""`scalescope comm` rendered: nccl-tests tables, OSU lines, ratios, α-β fits, JSON, CSV."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, fields
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.analyze.comm_bench import CommBenchmark, CommRow
from scalescope.report.formatting import fmt, fmt_bytes

COMM_SCHEMA = "scalescope.comm/1"
NCCL_COLUMNS = (
    "size (B)",
    "count (elements)",
    "type",
    "redop",
    "root",
    "time avg (µs)",
    "min (µs)",
    "max (µs)",
    "algbw (GB/s)",
    "busbw (GB/s)",
)
OSU_HEADER = f"{'# Size':<10}{'Avg Latency(us)':>18}{'Min Latency(us)':>18}"
OSU_HEADER += f"{'Max Latency(us)':>18}{'Iterations':>12}"


def nccl_cells(r: CommRow) -> list[str]:
    """The nccl-tests columns of one row, in its units (B, elements, µs, GB/s = 1e9 B/s)."""
    return [
        f"{r.nbytes:,}",
        f"{r.count:,}",
        r.dtype,
        r.redop,
        str(r.root),
        f"{r.time_avg_us:,.2f}",
        fmt(r.time_min_us, ",.2f"),
        fmt(r.time_max_us, ",.2f"),
        f"{r.algbw_gbps:.3f}",
        f"{r.busbw_gbps:.3f}",
    ]


def nccl_table(rows: list[CommRow], title: str) -> Table:
    table = Table(title=Text(title), title_justify="left")
    for i, col in enumerate(NCCL_COLUMNS):
        table.add_column(col, justify="left" if i in (2, 3) else "right")
    for r in rows:
        table.add_row(*nccl_cells(r))
    return table


def osu_lines(rows: list[CommRow], op: str, backend: str, world_size: int) -> list[str]:
    """The OSU micro-benchmarks latency block (osu_allreduce -f style) of one op and backend."""
    name = op.replace("_", " ").title().replace(" ", "")
    lines = [f"# OSU-style {name} Latency Test ({backend}, {world_size} ranks)", OSU_HEADER]
    for r in rows:
        lines.append(
            f"{r.nbytes:<10d}{r.time_avg_us:>18.2f}{fmt(r.time_min_us, '.2f'):>18}"
            f"{fmt(r.time_max_us, '.2f'):>18}{r.iters:>12d}"
        )
    return lines


def groups(bench: CommBenchmark) -> list[tuple[str, str, list[CommRow]]]:
    keys = dict.fromkeys((r.op, r.backend) for r in bench.rows)
    return [(op, b, [r for r in bench.rows if r.op == op and r.backend == b]) for op, b in keys]


def ratio_table(bench: CommBenchmark) -> Table:
    table = Table(title="Backends side by side (time ratio > 1: slower than the first)")
    for col in ("op", "size", "backends", "time ratio", "busbw ratio"):
        table.add_column(col, justify="right" if "ratio" in col else "left")
    for r in bench.ratios:
        table.add_row(
            r.op, fmt_bytes(r.nbytes), f"{r.backend} / {r.base}", f"{r.time_ratio:.2f}",
            f"{r.busbw_ratio:.2f}",
        )  # fmt: skip
    return table


def fits_table(bench: CommBenchmark) -> Table:
    table = Table(title="α-β fit: time = α + β × size (weighted least squares, docs/comm.md)")
    cols = ("op", "backend", "ranks", "α (µs)", "1/β (GB/s)", "fit error (rms %)", "sizes")
    for col in cols:
        table.add_column(col, justify="left" if col in ("op", "backend") else "right")
    for f in bench.fits:
        inv_beta = 1 / f.beta_s_per_byte / 1e9 if f.beta_s_per_byte > 0 else None
        table.add_row(
            f.op, f.backend, str(f.world_size), f"{f.alpha_s * 1e6:,.2f}",
            fmt(inv_beta, ",.3f"), f"{f.rel_err * 100:.1f}",
            f"{f.num_points} ({fmt_bytes(f.min_bytes)}–{fmt_bytes(f.max_bytes)})",
        )  # fmt: skip
    return table


def render_comm(bench: CommBenchmark, console: Console) -> None:
    head = f"n = {bench.world_size} ranks, {bench.dtype}, {bench.iters} timed calls"
    console.print(
        Text.assemble(
            ("Collectives micro-benchmark", "bold"), f" ({head} after {bench.warmup} warm-up)"
        )
    )
    console.print("time = slowest rank's call after a barrier; GB = 1e9 B; busbw = algbw × factor")
    for op, backend, rows in groups(bench):
        console.print(nccl_table(rows, f"{op} on {backend}"))
        console.print("\n".join(osu_lines(rows, op, backend, bench.world_size)), markup=False)
    if bench.ratios:
        console.print(ratio_table(bench))
    if bench.fits:
        console.print(fits_table(bench))
    for f in bench.failures:
        size = f" at {fmt_bytes(f.nbytes)}" if f.nbytes else ""
        console.print(Text.assemble(("failed", "red"), f" {f.op} on {f.backend}{size}: {f.error}"))
    for backend, reason in bench.unavailable.items():
        console.print(Text.assemble(("unavailable", "yellow"), f" {backend}: {reason}"))


def comm_json(bench: CommBenchmark, run_dir: str) -> dict[str, Any]:
    """The documented JSON (docs/comm.md): results, fits (for `project`), unavailable backends."""
    return {
        "schema": COMM_SCHEMA,
        "run_dir": run_dir,
        "world_size": bench.world_size,
        "dtype": bench.dtype,
        "iters": bench.iters,
        "warmup": bench.warmup,
        "results": [asdict(r) for r in bench.rows],
        "ratios": [asdict(r) for r in bench.ratios],
        "fits": [f.as_dict() for f in bench.fits],
        "failures": [asdict(f) for f in bench.failures],
        "unavailable": [{"backend": b, "reason": r} for b, r in bench.unavailable.items()],
    }


def comm_csv(bench: CommBenchmark) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    names = [f.name for f in fields(CommRow)]
    writer.writerow(names)
    for r in bench.rows:
        writer.writerow([getattr(r, n) for n in names])
    return out.getvalue()
