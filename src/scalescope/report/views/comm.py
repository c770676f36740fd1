"""`scalescope comm` as one document (nccl-tests tables, OSU lines, ratios, α-β fits, charts)
for the terminal and the HTML page, and its documented JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

import plotly.graph_objects as go

from scalescope.analyze.comm.comm_bench import CommBenchmark, CommRow
from scalescope.events.units import fmt_bytes
from scalescope.report.document import (
    Chart,
    Column,
    Document,
    Heading,
    Line,
    Preformatted,
    Section,
    Table,
)
from scalescope.report.formatting import fmt
from scalescope.report.media.charts import layout, plotly_text
from scalescope.report.subjects import CommRun, NcclTestsRows

COMM_SCHEMA = "scalescope.comm/1"
COMM_CHART_IDS = ("chart-comm-latency", "chart-comm-busbw")
NCCL_COLUMNS = (
    Column("size", "B"),
    Column("count", "elements"),
    Column("type", align="left"),
    Column("redop", align="left"),
    Column("root"),
    Column("time avg", "µs"),
    Column("min", "µs"),
    Column("max", "µs"),
    Column("algbw", "GB/s"),
    Column("busbw", "GB/s"),
)
OSU_HEADER = f"{'# Size':<10}{'Avg Latency(us)':>18}{'Min Latency(us)':>18}"
OSU_HEADER += f"{'Max Latency(us)':>18}{'Iterations':>12}"


def nccl_cells(r: CommRow) -> tuple[str, ...]:
    """The nccl-tests columns of one row, in its units (B, elements, µs, GB/s = 1e9 B/s)."""
    return (
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
    )


def nccl_values(r: CommRow) -> tuple[Any, ...]:
    return (
        r.nbytes,
        r.count,
        r.dtype,
        r.redop,
        r.root,
        r.time_avg_us,
        r.time_min_us,
        r.time_max_us,
        r.algbw_gbps,
        r.busbw_gbps,
    )


def nccl_table(rows: Sequence[CommRow], title: str) -> Table:
    return Table(
        title,
        NCCL_COLUMNS,
        tuple(nccl_cells(r) for r in rows),
        tuple(nccl_values(r) for r in rows),
    )


def nccl_document(log: NcclTestsRows) -> Document:
    return Document(log.title, (nccl_table(log.rows, log.title),))


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
    cols = (
        Column("op", align="left"),
        Column("size", align="left"),
        Column("backends", align="left"),
        Column("time ratio"),
        Column("busbw ratio"),
    )
    rows = tuple(
        (
            r.op,
            fmt_bytes(r.nbytes),
            f"{r.backend} / {r.base}",
            f"{r.time_ratio:.2f}",
            f"{r.busbw_ratio:.2f}",
        )
        for r in bench.ratios
    )
    values = tuple(
        (r.op, r.nbytes, f"{r.backend} / {r.base}", r.time_ratio, r.busbw_ratio)
        for r in bench.ratios
    )
    title = "Backends side by side (time ratio > 1: slower than the first)"
    return Table(title, cols, rows, values)


def fits_table(bench: CommBenchmark) -> Table:
    cols = (
        Column("op", align="left"),
        Column("backend", align="left"),
        Column("ranks"),
        Column("α", "µs"),
        Column("1/β", "GB/s"),
        Column("fit error", "rms %"),
        Column("sizes"),
    )
    rows, values = [], []
    for f in bench.fits:
        inv_beta = 1 / f.beta_s_per_byte / 1e9 if f.beta_s_per_byte > 0 else None
        rows.append(
            (
                f.op,
                f.backend,
                str(f.world_size),
                f"{f.alpha_s * 1e6:,.2f}",
                fmt(inv_beta, ",.3f"),
                f"{f.rel_err * 100:.1f}",
                f"{f.num_points} ({fmt_bytes(f.min_bytes)}–{fmt_bytes(f.max_bytes)})",
            )
        )
        values.append(
            (
                f.op,
                f.backend,
                f.world_size,
                f.alpha_s * 1e6,
                inv_beta,
                f.rel_err * 100,
                f.num_points,
            )
        )
    title = "α-β fit: time = α + β × size (weighted least squares, docs/comm.md)"
    return Table(title, cols, tuple(rows), tuple(values))


def comm_chart(bench: CommBenchmark, chart_id: str, title: str, value: str, unit: str) -> Chart:
    fig = go.Figure()
    for op, backend, rows in groups(bench):
        fig.add_trace(
            go.Scatter(
                x=[r.nbytes for r in rows],
                y=[getattr(r, value) for r in rows],
                name=plotly_text(f"{op} · {backend}"),
                mode="lines+markers",
            )
        )
    if not fig.data:
        return Chart(chart_id, title, None, "No size was measured.")
    layout(
        fig,
        xaxis={"type": "log", "title": {"text": "message size (bytes)"}},
        yaxis={"type": "log", "title": {"text": unit}},
    )
    return Chart(chart_id, title, fig)


def comm_document(bench: CommBenchmark) -> Document:
    """Everything `comm` shows, once: the terminal prints it, the HTML page draws it too."""
    head = f"(n = {bench.world_size} ranks, {bench.dtype}, {bench.iters} timed calls after "
    head += f"{bench.warmup} warm-up)"
    blocks: list = [
        Heading("Collectives micro-benchmark", head),
        Line("time = slowest rank's call after a barrier; GB = 1e9 B; busbw = algbw × factor"),
        comm_chart(
            bench, COMM_CHART_IDS[0], "Latency by message size", "time_avg_us", "µs per call"
        ),
        comm_chart(bench, COMM_CHART_IDS[1], "Bus bandwidth by message size", "busbw_gbps", "GB/s"),
    ]
    for op, backend, rows in groups(bench):
        blocks.append(nccl_table(rows, f"{op} on {backend}"))
        blocks.append(Preformatted(tuple(osu_lines(rows, op, backend, bench.world_size))))
    if bench.ratios:
        blocks.append(ratio_table(bench))
    if bench.fits:
        blocks.append(fits_table(bench))
    for f in bench.failures:
        size = f" at {fmt_bytes(f.nbytes)}" if f.nbytes else ""
        blocks.append(Line(f"{f.op} on {f.backend}{size}: {f.error}", "failed", "red"))
    if bench.unavailable:
        lines = tuple(
            Line(f"{b}: {why}", "unavailable", "yellow") for b, why in bench.unavailable.items()
        )
        blocks.append(Section("Unavailable backends", lines))
    return Document(f"scalescope comm {bench.world_size} ranks", tuple(blocks))


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


def comm_run_json(subject: CommRun) -> str:
    """``comm --json``: the benchmark with the run directory it was measured in."""
    return json.dumps(comm_json(subject.bench, str(subject.run_dir)), indent=2) + "\n"


def comm_csv(bench: CommBenchmark) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    names = [f.name for f in fields(CommRow)]
    writer.writerow(names)
    for r in bench.rows:
        writer.writerow([getattr(r, n) for n in names])
    return out.getvalue()
