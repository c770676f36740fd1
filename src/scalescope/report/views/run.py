"""The run report as one document: header, hang, failures, problems, throughput and phases,
collectives, the cross-rank analysis. The terminal prints all of it; the HTML dashboard
(report/views/dashboard.py) draws its hang, failures, problems and by-size table from the same
blocks."""

from __future__ import annotations

from scalescope.analyze import RunAnalysis, StepAnalysis
from scalescope.analyze.rank_status import RankStatus
from scalescope.events.units import first_few, fmt_bytes
from scalescope.report.document import (
    Block,
    Column,
    Document,
    Grid,
    Heading,
    Line,
    Preformatted,
    Section,
    Table,
)
from scalescope.report.formatting import (
    ERROR_LINES,
    NA,
    fmt,
    plural,
)
from scalescope.report.views.collectives import collectives_section, no_data
from scalescope.report.views.cross_rank import cross_rank_section
from scalescope.report.views.hang import hang_lines
from scalescope.report.views.p2p import p2p_section
from scalescope.report.views.pipeline import pipeline_section
from scalescope.report.views.rank_summary import (
    ALL_IN_JSON,
    RANK_ROWS_LIMIT,
    RankMetric,
    condensed_blocks,
    host_list,
    hosts_of,
)
from scalescope.report.views.slowdowns import slowdowns_section
from scalescope.report.views.whatif import whatif_section


def header_rows(a: RunAnalysis) -> tuple[tuple[str, str], ...]:
    """The run's facts, as the report's header and the dashboard's summary card say them."""
    per_node = f" ({a.nproc_per_node} per node)" if a.nproc_per_node else ""
    return (
        ("workload", a.workload),
        ("command", " ".join(a.command) or NA),
        ("world size", f"{a.world_size} ranks{per_node}"),
        ("hosts", host_list(a.hostnames) if a.hostnames else NA),
        ("status", a.status),
        ("duration", fmt(a.duration_s, ".1f", "s")),
        ("probe", "on" if a.probe else "off (no events recorded)"),
        ("warm-up", f"first {plural(a.warmup_steps, 'step')} left out of step statistics"),
    )


def report_heading(a: RunAnalysis) -> Heading:
    return Heading(f"scalescope report: run {a.run_id}", rule=True)


def header(a: RunAnalysis) -> tuple[Block, ...]:
    return (report_heading(a), Grid(header_rows(a)))


def hang_section(a: RunAnalysis) -> Section | None:
    """The hang first: verdicts, ranks, main-thread stacks (``<pre id="hang">`` on the page)."""
    if a.hang is None:
        return None
    lines = tuple(hang_lines(a.hang, stacks="main"))
    styles = tuple("bold" if line.startswith("HANG") else "" for line in lines)
    blocks: list[Block] = [Preformatted(lines, styles, html_id="hang")]
    if a.hang.source == "live":
        blocks.append(Line("every thread's stack: hang.txt in the run directory"))
    return Section("Hang", tuple(blocks))


def failure_blocks(a: RunAnalysis) -> tuple[Block, ...]:
    """Each rank that did not complete, the first to fail first, with the end of its error;
    nothing unless the run failed or was interrupted."""
    if not a.failed_ranks and a.status not in ("failed", "interrupted"):
        return ()
    not_done = [r for r in a.ranks if r.status != "completed"]
    if not not_done:
        return (Line(f"The run is {a.status}, but every rank reported completing."),)
    first = a.first_failure
    not_done.sort(key=lambda r: r is not first)
    blocks: list[Block] = []
    for r in not_done[:RANK_ROWS_LIMIT]:
        code = "" if r.exit_code is None else f", exit code {r.exit_code}"
        steps = "" if r.steps is None else f", {plural(r.steps, 'step')} done"
        why = " (first to fail)" if r is first and r.status != "interrupted" else ""
        if r.failed_because_of_peer:
            why = " (lost a peer)"
        head = f"rank {r.rank} on {r.hostname or NA}: {r.status}{code}{steps}{why}"
        error = tuple((r.error or "").rstrip().splitlines()) or (NA,)
        blocks += [Line(head, style="bold"), Preformatted(error, tail=ERROR_LINES)]
    if len(not_done) > RANK_ROWS_LIMIT:
        blocks.append(_more_not_done(not_done[RANK_ROWS_LIMIT:]))
    return tuple(blocks)


def _more_not_done(rest: list[RankStatus]) -> Line:
    """One line for the ranks past the limit: how many ended how, and the first few."""
    counts: dict[str, int] = {}
    for r in rest:
        how = "lost a peer" if r.failed_because_of_peer else r.status
        counts[how] = counts.get(how, 0) + 1
    how = ", ".join(f"{n:,} {what}" for what, n in counts.items())
    ranks = first_few([r.rank for r in rest])
    return Line(f"{len(rest):,} more ranks did not complete ({how}): ranks {ranks}; {ALL_IN_JSON}")


def problem_lines(a: RunAnalysis) -> tuple[Line, ...]:
    return tuple(Line(f"- {problem}") for problem in a.problems)


def _problems(a: RunAnalysis) -> Section | None:
    if not a.problems:
        return None
    rest = Line("Everything else that was recorded is analysed below.")
    return Section("Problems with the recorded data", (*problem_lines(a), rest))


def _step_summary(s: StepAnalysis, paused: tuple[int, ...] = ()) -> Grid:
    done = [r for r in s.ranks if r.num_steps]
    first = min(r.first_step for r in done if r.first_step is not None)
    last = max(r.last_step for r in done if r.last_step is not None)
    if s.warmup_fallback:
        scope = f"no step reached the warm-up of {s.warmup_steps}: all used, warm-up included"
    else:
        scope = f"warm-up steps 0-{s.warmup_steps - 1} left out" if s.warmup_steps else "no warm-up"
    if paused:
        shown = ", ".join(map(str, paused[:6])) + (" ..." if len(paused) > 6 else "")
        scope += f"; pause steps {shown} left out (the pause finding)"
    throughput, mean_step = throughput_rows(s)
    samples = f"{s.total_samples:,} over {fmt(s.span_s, '.3f', 's')} (longest rank span)"
    measured = f"{first} to {last} on {plural(len(done), 'rank')} ({scope})"
    return Grid((throughput, ("samples", samples), mean_step, ("measured steps", measured)))


def throughput_rows(s: StepAnalysis) -> tuple[tuple[str, str], tuple[str, str]]:
    """Throughput and mean step time, as the report and the summary card say them."""
    scope = (
        " (all ranks)" if s.sample_copies == 1
        else f" (all ranks, each sample once: {s.sample_copies} ranks load it, tp x cp)"
    )  # fmt: skip
    throughput = fmt(s.samples_per_s, ",.1f", "samples/s") + scope
    if s.samples_per_s is None:
        throughput = (
            f"{fmt(s.steps_per_s, ',.2f', 'global steps/s')} (samples not counted: no "
            "DataLoader batch, no DDP forward)"
        )
    return ("throughput", throughput), ("mean step time", fmt(s.mean_step_ms, ".2f", "ms"))


RANK_COLUMNS = (
    Column("rank", align="left"),
    Column("steps"),
    Column("samples"),
    Column("span", "s"),
    Column("samples/s"),
    Column("mean step", "ms"),
    Column("peak", align="left"),
)


def _rank_throughput_table(s: StepAnalysis) -> Table:
    """One row per rank (beyond the limit, ``_rank_throughput`` condenses it)."""
    rows = tuple(
        (
            str(r.rank),
            f"{r.num_steps:,}",
            f"{r.samples:,}",
            fmt(r.span_s, ".3f"),
            fmt(r.samples_per_s, ",.1f"),
            fmt(r.mean_step_ms, ".2f"),
            ", ".join(f"{fmt_bytes(m.peak_bytes)} {m.name}" for m in r.memory) or NA,
        )
        for r in s.ranks
    )
    return Table("Per rank", RANK_COLUMNS, rows)


def _rank_throughput(a: RunAnalysis, s: StepAnalysis) -> tuple[Block, ...]:
    """The per-rank table; beyond RANK_ROWS_LIMIT ranks, its slowest and fastest ranks and
    the distribution of each column over all ranks."""
    table = _rank_throughput_table(s)
    if len(s.ranks) <= RANK_ROWS_LIMIT:
        return (table,)
    spreads = a.spreads.columns
    metrics = [
        RankMetric("mean step", "ms", spreads["mean_step_ms"]),
        RankMetric("samples/s", "", spreads["samples_per_s"]),
        RankMetric("span", "s", spreads["span_s"]),
    ]
    if a.cross_rank is not None and a.cross_rank.ranks:
        metrics.insert(0, RankMetric("busy", "ms/step", spreads["busy_ms_per_step"]))
    return condensed_blocks(a, table, [r.rank for r in s.ranks], metrics)


PHASE_COLUMNS = (
    Column("rank", align="left"),
    Column("phase", align="left"),
    Column("mean", "ms"),
    Column("p50", "ms"),
    Column("p95", "ms"),
    Column("share", "%"),
)


ON_CPU = Column("on CPU", "%")
ON_CPU_NOTE = (
    "on CPU: the training thread's CPU time, % of the phase's time; the rest it waited "
    "(asleep, on I/O or a lock, a device, a peer, or runnable behind another process)"
)


def _phase_table(s: StepAnalysis) -> Table:
    """One group of rows per rank; the phases a rank did not record in the caption; the
    share on a CPU where the probe recorded CPU rows."""
    cpu = any(p.on_cpu_pct is not None for r in s.ranks for p in r.phases)
    rows, groups, notes = [], [], []
    for r in s.ranks:
        for i, p in enumerate(r.phases):
            row = (
                str(r.rank) if i == 0 else "",
                p.phase,
                fmt(p.mean_ms, ".2f"),
                fmt(p.p50_ms, ".2f"),
                fmt(p.p95_ms, ".2f"),
                fmt(p.share_pct, ".1f"),
            )
            rows.append((*row, fmt(p.on_cpu_pct, ".0f")) if cpu else row)
        if r.phases:
            groups.append(len(r.phases))
        if r.missing_phases and r.num_steps:
            notes.append(f"rank {r.rank}: {', '.join(r.missing_phases)}")
    said = ["not recorded (counted in other): " + "; ".join(notes)] if notes else []
    caption = "; ".join([*said, *([ON_CPU_NOTE] if cpu else [])])
    title = "Step phases per rank (per-step sums)"
    columns = (*PHASE_COLUMNS, ON_CPU) if cpu else PHASE_COLUMNS
    return Table(title, columns, tuple(rows), groups=tuple(groups), caption=caption)


PHASE_SPREAD_COLUMNS = (
    Column("phase", align="left"),
    Column("min", "ms"),
    Column("p10", "ms"),
    Column("p50", "ms"),
    Column("p90", "ms"),
    Column("max", "ms"),
    Column("slowest rank", align="left"),
)


def _phase_spread_table(a: RunAnalysis, s: StepAnalysis) -> Table:
    """Beyond RANK_ROWS_LIMIT ranks: per phase, the distribution over ranks of its mean ms per
    step, and the rank (with its host) where it is longest."""
    hosts = hosts_of(a)
    rows = [
        (p.phase, *(f"{v:,.2f}" for v in p.spread.values),
         f"{p.slowest_rank} ({hosts.get(p.slowest_rank, NA)})")
        for p in a.spreads.phases
    ]  # fmt: skip
    notes = [
        f"{name} on {plural(len(ranks), 'rank')} ({first_few(ranks)})"
        for name, ranks in a.spreads.unrecorded
    ]
    caption = f"mean ms per measured step of each of {len(s.ranks):,} ranks; {ALL_IN_JSON}"
    if notes:
        caption += "; not recorded (counted in other): " + "; ".join(notes)
    title = f"Step phases over {len(s.ranks):,} ranks (per-step sums)"
    return Table(title, PHASE_SPREAD_COLUMNS, tuple(rows), caption=caption)


def _steps(a: RunAnalysis) -> Section:
    s = a.steps
    if s is None:
        blocks: tuple[Block, ...] = (no_data(a, "step events"),)
    else:
        paused = tuple(p.step for p in a.pauses.pauses) if a.pauses else ()
        phases = _phase_table(s) if len(s.ranks) <= RANK_ROWS_LIMIT else _phase_spread_table(a, s)
        blocks = (_step_summary(s, paused), *_rank_throughput(a, s), phases)
    return Section("Throughput and step time", blocks)


def run_document(a: RunAnalysis) -> Document:
    """The report: header, then what went wrong (hang, failures, problems), then the
    measurements."""
    failures = failure_blocks(a)
    blocks = (
        *header(a),
        hang_section(a),
        Section("Failures", failures, html_id="failures") if failures else None,
        _problems(a),
        _steps(a),
        collectives_section(a),
        cross_rank_section(a),
        p2p_section(a),
        pipeline_section(a),
        slowdowns_section(a),
        whatif_section(a.whatif, a.whatif_missing),
    )
    return Document(f"scalescope report: run {a.run_id}", tuple(b for b in blocks if b is not None))
