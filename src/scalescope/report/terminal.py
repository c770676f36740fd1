"""Render a RunAnalysis as terminal text: the only place that turns numbers into prose."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.analyze import (
    CollectiveAnalysis,
    RunAnalysis,
    StepAnalysis,
)
from scalescope.report.formatting import (
    NA,
    fmt,
    fmt_bytes,
    fmt_bytes_exact,
    fmt_calls,
    kv_grid,
    last_lines,
    plural,
    section,
)


def _header(a: RunAnalysis, console: Console) -> None:
    console.rule(Text(f"scalescope report: run {a.run_id}"))
    per_node = f" ({a.nproc_per_node} per node)" if a.nproc_per_node else ""
    rows = [
        ("workload", a.workload),
        ("command", " ".join(a.command) or NA),
        ("world size", f"{a.world_size} ranks{per_node}"),
        ("hosts", f"{len(a.hostnames)}: {', '.join(a.hostnames)}" if a.hostnames else NA),
        ("status", a.status),
        ("duration", fmt(a.duration_s, ".1f", "s")),
        ("probe", "on" if a.probe else "off (no events recorded)"),
        ("warm-up", f"first {plural(a.warmup_steps, 'step')} left out of step statistics"),
    ]
    console.print(kv_grid(rows))


def _failures(a: RunAnalysis, console: Console) -> None:
    if not a.failed_ranks and a.status not in ("failed", "interrupted"):
        return
    section(console, "Failures")
    not_done = [r for r in a.ranks if r.status != "completed"]
    if not not_done:
        console.print(Text(f"The run is {a.status}, but every rank reported completing."))
        return
    first = a.first_failure
    not_done.sort(key=lambda r: r is not first)
    for r in not_done:
        code = "" if r.exit_code is None else f", exit code {r.exit_code}"
        steps = "" if r.steps is None else f", {plural(r.steps, 'step')} done"
        why = " (first to fail)" if r is first and r.status != "interrupted" else ""
        if r.failed_because_of_peer:
            why = " (lost a peer)"
        head = f"rank {r.rank} on {r.hostname or NA}: {r.status}{code}{steps}{why}"
        console.print(Text(head, style="bold"))
        console.print(Text(last_lines(r.error)), soft_wrap=True)


def _hang(a: RunAnalysis, console: Console) -> None:
    if a.hang is None:
        return
    from scalescope.report.hang_view import hang_lines

    section(console, "Hang")
    for line in hang_lines(a.hang, stacks="main"):
        console.print(Text(line, style="bold" if line.startswith("HANG") else ""), soft_wrap=True)
    if a.hang.source == "live":
        console.print(Text("every thread's stack: hang.txt in the run directory"))


def _problems(a: RunAnalysis, console: Console) -> None:
    if not a.problems:
        return
    section(console, "Problems with the recorded data")
    for problem in a.problems:
        console.print(Text(f"- {problem}"))
    console.print(Text("Everything else that was recorded is analysed below."))


def _no_data(a: RunAnalysis, what: str) -> Text:
    if not a.probe:
        return Text(f"No {what}: the run was launched with the probe off, so none was recorded.")
    return Text(f"No {what} were recorded (see problems above, if any).")


def _step_summary(s: StepAnalysis) -> list[tuple[str, str]]:
    done = [r for r in s.ranks if r.num_steps]
    first = min(r.first_step for r in done if r.first_step is not None)
    last = max(r.last_step for r in done if r.last_step is not None)
    if s.warmup_fallback:
        scope = f"no step reached the warm-up of {s.warmup_steps}: all used, warm-up included"
    else:
        scope = f"warm-up steps 0-{s.warmup_steps - 1} left out" if s.warmup_steps else "no warm-up"
    throughput = fmt(s.samples_per_s, ",.1f", "samples/s") + " (all ranks)"
    if s.samples_per_s is None:
        throughput = (
            f"{fmt(s.steps_per_s, ',.2f', 'global steps/s')} (samples not counted: no "
            "DataLoader batch, no DDP forward)"
        )
    return [
        ("throughput", throughput),
        ("samples", f"{s.total_samples:,} over {fmt(s.span_s, '.3f', 's')} (longest rank span)"),
        ("mean step time", fmt(s.mean_step_ms, ".2f", "ms")),
        ("measured steps", f"{first} to {last} on {plural(len(done), 'rank')} ({scope})"),
    ]


def _rank_throughput_table(s: StepAnalysis) -> Table:
    table = Table(title="Per rank", title_justify="left")
    for col in ("rank", "steps", "samples", "span (s)", "samples/s", "mean step (ms)", "peak"):
        table.add_column(col, justify="left" if col in ("rank", "peak") else "right")
    for r in s.ranks:
        memory = Text(", ".join(f"{fmt_bytes(m.peak_bytes)} {m.name}" for m in r.memory) or NA)
        table.add_row(
            str(r.rank),
            f"{r.num_steps:,}",
            f"{r.samples:,}",
            fmt(r.span_s, ".3f"),
            fmt(r.samples_per_s, ",.1f"),
            fmt(r.mean_step_ms, ".2f"),
            memory,
        )
    return table


def _phase_table(s: StepAnalysis) -> Table:
    table = Table(title="Step phases per rank (per-step sums)", title_justify="left")
    for col in ("rank", "phase", "mean (ms)", "p50 (ms)", "p95 (ms)", "share (%)"):
        table.add_column(col, justify="left" if col in ("rank", "phase") else "right")
    notes = []
    for r in s.ranks:
        for i, p in enumerate(r.phases):
            last = i == len(r.phases) - 1
            table.add_row(
                str(r.rank) if i == 0 else "",
                Text(p.phase),
                fmt(p.mean_ms, ".2f"),
                fmt(p.p50_ms, ".2f"),
                fmt(p.p95_ms, ".2f"),
                fmt(p.share_pct, ".1f"),
                end_section=last,
            )
        if r.missing_phases and r.num_steps:
            notes.append(f"rank {r.rank}: {', '.join(r.missing_phases)}")
    if notes:
        table.caption = Text("not recorded (counted in other): " + "; ".join(notes))
        table.caption_justify = "left"
    return table


def _steps(a: RunAnalysis, console: Console) -> None:
    section(console, "Throughput and step time")
    s = a.steps
    if s is None:
        console.print(_no_data(a, "step events"))
        return
    console.print(kv_grid(_step_summary(s)))
    console.print(_rank_throughput_table(s))
    console.print(_phase_table(s))


def _op_table(c: CollectiveAnalysis) -> Table:
    table = Table(title="Collectives per op (per rank)", title_justify="left")
    cols = ("op", "tag", "ranks", "calls", "total (ms)", "bytes", "incomplete calls")
    for col in cols:
        table.add_column(col, justify="left" if col in ("op", "tag", "bytes") else "right")
    for o in c.ops:
        table.add_row(
            Text(o.op),
            Text(o.tag or NA),
            str(o.num_ranks),
            fmt_calls(o.calls_min, o.calls_max),
            f"{o.total_ms_per_rank:,.2f}",
            fmt_bytes(o.nbytes_per_rank),
            str(o.incomplete_calls),
        )
    return table


def _size_table(c: CollectiveAnalysis) -> Table:
    title = f"Collectives by message size (nccl-tests columns, n = {c.world_size} ranks)"
    table = Table(title=title, title_justify="left")
    table.add_column("op", no_wrap=True)
    cols = ("size (B)", "count", "avg (µs)", "min (µs)", "max (µs)", "total (ms)")
    for col in (*cols, "algbw (GB/s)", "busbw (GB/s)"):
        table.add_column(col, justify="right")
    for z in c.sizes:
        table.add_row(
            Text(z.op),
            f"{z.nbytes:,}",
            fmt_calls(z.calls_min, z.calls_max),
            f"{z.time_avg_us:,.1f}",
            f"{z.time_min_us:,.1f}",
            f"{z.time_max_us:,.1f}",
            f"{z.total_ms_per_rank:,.2f}",
            fmt(z.algbw_gbps, ".2f"),
            fmt(z.busbw_gbps, ".2f"),
        )
    table.caption = (
        "count and total per rank; time per call (avg/min/max) from issue to completion, "
        "over all ranks; "
        "GB = 1e9 B; algbw = size / avg time; busbw = algbw x nccl-tests factor"
    )
    table.caption_justify = "left"
    return table


def _per_step_table(c: CollectiveAnalysis) -> Table:
    table = Table(title="Traffic per measured step (per rank)", title_justify="left")
    for col in ("tag", "bytes/step", "calls/step"):
        table.add_column(col, justify="right" if col == "calls/step" else "left")
    for t in c.per_step:
        table.add_row(
            Text(t.tag or NA), fmt_bytes_exact(t.nbytes_per_step), f"{t.calls_per_step:,.2f}"
        )
    return table


def _incomplete_table(c: CollectiveAnalysis) -> Table:
    calls = plural(c.incomplete_calls, "call")
    title = f"Collectives that never completed ({calls}, not in the times)"
    table = Table(title=title, title_justify="left")
    for col in ("rank", "op", "tag", "calls", "first seq", "step"):
        table.add_column(col)
    for i in c.incomplete:
        seq = NA if i.first_seq < 0 else str(i.first_seq)
        table.add_row(
            str(i.rank), Text(i.op), Text(i.tag or NA), str(i.calls), seq, str(i.first_step)
        )
    return table


def _collectives(a: RunAnalysis, console: Console) -> None:
    section(console, "Collectives")
    c = a.collectives
    if c is None:
        console.print(_no_data(a, "collectives"))
        return
    console.print(_op_table(c))
    if c.sizes:
        console.print(_size_table(c))
    if c.per_step:
        console.print(_per_step_table(c))
    if c.incomplete:
        console.print(_incomplete_table(c))


def render_terminal(analysis: RunAnalysis, console: Console) -> None:
    """Print the report: header, failures and problems first, then the measurements."""
    _header(analysis, console)
    _hang(analysis, console)
    _failures(analysis, console)
    _problems(analysis, console)
    _steps(analysis, console)
    _collectives(analysis, console)
    from scalescope.report.cross_rank_view import render_cross_rank  # it imports our helpers

    render_cross_rank(analysis, console)
