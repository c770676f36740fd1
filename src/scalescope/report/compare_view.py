"""Render a RunComparison: terminal tables with B / A ratios, and JSON
(``scalescope.compare/1``, documented in docs/report-schema.md)."""

from __future__ import annotations

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.analyze.compare import Pair, RunComparison, SizeKey
from scalescope.report.formatting import NA, fmt, fmt_count, kv_grid, section

COMPARE_SCHEMA = "scalescope.compare/1"


def comparison_json(comparison: RunComparison) -> bytes:
    """The comparison as JSON with its schema version first; None fields become ``null``."""
    document = {"schema": COMPARE_SCHEMA, **msgspec.to_builtins(comparison)}
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"


def fmt_ratio(ratio: float | None) -> str:
    return NA if ratio is None else f"{ratio:.2f}x"


def _cells(p: Pair, spec: str) -> list[str]:
    return [fmt(p.a, spec), fmt(p.b, spec), fmt_ratio(p.ratio)]


def _table(title: str | None, first: tuple[str, ...], pairs: tuple[str, ...]) -> Table:
    """A table whose leading columns are ``first`` and then A, B, B/A for each of ``pairs``."""
    table = Table(title=title, title_justify="left")
    for col in first:
        table.add_column(col, no_wrap=True)
    for name in pairs:
        prefix = f"{name} " if name else ""
        for side in ("A", "B", "B/A"):
            table.add_column(f"{prefix}{side}", justify="right")
    return table


def _facts(c: RunComparison, console: Console) -> None:
    table = Table(title="Runs", title_justify="left")
    for col in ("", "A", "B"):
        table.add_column(col)
    rows = [
        ("run", c.a.run_id, c.b.run_id),
        ("workload", c.a.workload, c.b.workload),
        ("command", " ".join(c.a.command) or NA, " ".join(c.b.command) or NA),
        ("ranks", str(c.a.world_size), str(c.b.world_size)),
        ("ranks per node", str(c.a.nproc_per_node), str(c.b.nproc_per_node)),
        ("hosts", str(c.a.num_hosts), str(c.b.num_hosts)),
        ("status", c.a.status, c.b.status),
        ("warm-up steps", str(c.a.warmup_steps), str(c.b.warmup_steps)),
        ("measured steps", fmt(c.a.measured_steps, ","), fmt(c.b.measured_steps, ",")),
    ]
    for row in rows:
        table.add_row(*(Text(v) for v in row))
    console.print(table)


def _throughput(c: RunComparison, console: Console) -> None:
    table = _table(None, ("",), ("",))
    table.add_row("throughput (samples/s)", *_cells(c.samples_per_s, ",.1f"))
    table.add_row("mean step (ms)", *_cells(c.mean_step_ms, ",.2f"))
    console.print(table)
    if c.phases:
        phases = _table("Step phases (mean ms per step, averaged over ranks)", ("phase",), ("",))
        for p in c.phases:
            phases.add_row(Text(p.phase), *_cells(p.mean_ms, ",.2f"))
        console.print(phases)


def _only(keys: tuple[SizeKey, ...]) -> str:
    return ", ".join(f"{k.op} {k.nbytes:,} B" for k in keys)


def _sizes(c: RunComparison, console: Console) -> None:
    if not (c.sizes or c.sizes_only_a or c.sizes_only_b):
        console.print(Text("No collectives were recorded in either run."))
        return
    table = _table(
        "Collectives by message size (sizes in both runs)",
        ("op", "size (B)"),
        ("count", "avg (µs)", "busbw (GB/s)"),
    )
    for s in c.sizes:
        calls = [
            fmt_count(v) if v is not None else NA for v in (s.calls_per_rank.a, s.calls_per_rank.b)
        ]
        table.add_row(
            Text(s.op),
            f"{s.nbytes:,}",
            *calls,
            fmt_ratio(s.calls_per_rank.ratio),
            *_cells(s.time_avg_us, ",.1f"),
            *_cells(s.busbw_gbps, ".2f"),
        )
    notes = [f"only in A: {_only(c.sizes_only_a)}"] if c.sizes_only_a else []
    notes += [f"only in B: {_only(c.sizes_only_b)}"] if c.sizes_only_b else []
    table.caption = Text("; ".join(["count per rank; GB = 1e9 B", *notes]))
    table.caption_justify = "left"
    console.print(table)


def _straggler(rank: int | None) -> str:
    return "none" if rank is None else f"rank {rank}"


def _cross_rank(c: RunComparison, console: Console) -> None:
    x = c.cross_rank
    if x is None:
        console.print(Text("No cross-rank comparison: a run has fewer than two ranks with events."))
        return
    console.print(
        kv_grid([("straggler", f"A: {_straggler(x.straggler_a)}; B: {_straggler(x.straggler_b)}")])
    )
    table = _table("Across ranks (per rank figures averaged over ranks)", ("",), ("",))
    table.add_row("wait in collectives (ms/step)", *_cells(x.wait_ms_per_step, ",.2f"))
    table.add_row("busy (ms/step)", *_cells(x.busy_ms_per_step, ",.2f"))
    table.add_row("load imbalance (%)", *_cells(x.load_imbalance_pct, ".1f"))
    table.add_row("comm hidden under backward (ms/step)", *_cells(x.hidden_ms_per_step, ",.2f"))
    table.add_row("comm exposed (ms/step)", *_cells(x.exposed_ms_per_step, ",.2f"))
    table.add_row("ideal throughput (samples/s)", *_cells(x.ideal_samples_per_s, ",.1f"))
    console.print(table)
    if not x.waits:
        return
    waits = _table(
        "Waiting versus transfer (op, tag and size in both runs)",
        ("op", "tag", "size (B)"),
        ("wait avg (µs)", "transfer avg (µs)"),
    )
    for w in x.waits:
        waits.add_row(
            Text(w.op),
            Text(w.tag or NA),
            f"{w.nbytes:,}",
            *_cells(w.wait_avg_us, ",.1f"),
            *_cells(w.transfer_avg_us, ",.1f"),
        )
    console.print(waits)


def render_comparison(comparison: RunComparison, console: Console) -> None:
    """Print run B against run A; every ratio is B / A."""
    c = comparison
    console.rule(Text(f"scalescope compare: A = {c.a.run_id}, B = {c.b.run_id} (ratios B/A)"))
    _facts(c, console)
    section(console, "Throughput and step time")
    _throughput(c, console)
    section(console, "Collectives")
    _sizes(c, console)
    section(console, "Across ranks")
    _cross_rank(c, console)
