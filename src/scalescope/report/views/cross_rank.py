"""The run report's section on the cross-rank analysis: clocks, waiting versus transfer, stragglers,
load imbalance, overlap and the throughput without waiting."""

from __future__ import annotations

from rich.console import Console

from scalescope.analyze import RunAnalysis
from scalescope.analyze.cross_rank import STRAGGLER_MIN_STEP_PCT, ClockAlignment, CrossRankAnalysis
from scalescope.analyze.steps.gaps import describe
from scalescope.analyze.steps.step_slots import OTHER
from scalescope.events.units import fmt_offset_ms, fmt_us
from scalescope.report.document import Block, Column, Grid, Line, Section, Table
from scalescope.report.formatting import NA, fmt
from scalescope.report.media.terminal import render_block
from scalescope.report.views.rank_summary import RANK_ROWS_LIMIT, RankMetric, condensed_blocks

CLOCK_RANKS_LISTED = 8
"""Up to this many ranks, one clock line each; beyond, one line per method with ranges."""


def _transfer(ms: float | None) -> str:
    if ms is None:
        return ""
    return f", of which {ms:,.2f} ms moving bytes (the least per step over the ranks)"


def _clock(c: ClockAlignment) -> str:
    if c.method == "reference":
        return "reference (rank 0's clock)"
    if c.method == "none":
        return "not aligned (no clock measurement or rank meta file): own clock used"
    text = fmt_offset_ms(c.offset_ns)
    text += f" ± {fmt_us(c.uncertainty_ns)}" if c.uncertainty_ns is not None else " ± unknown"
    if c.drift_ns is not None:
        text += f", drift {c.drift_ns / 1e3:+,.1f} µs"
    return f"{text} ({c.method})"


def _clock_summary(method: str, clocks: list[ClockAlignment]) -> str:
    ranks = ", ".join(str(c.rank) for c in clocks[:3]) + (", ..." if len(clocks) > 3 else "")
    offsets = [c.offset_ns for c in clocks]
    lowest, highest = fmt_offset_ms(min(offsets)), fmt_offset_ms(max(offsets))
    text = f"{len(clocks)} ranks ({ranks}): offsets {lowest} to {highest}"
    known = [c.uncertainty_ns for c in clocks if c.uncertainty_ns is not None]
    text += f", uncertainty up to {fmt_us(max(known))}" if known else ", uncertainty unknown"
    drifts = [abs(c.drift_ns) for c in clocks if c.drift_ns is not None]
    text += f", |drift| up to {fmt_us(max(drifts))}" if drifts else ""
    return f"{method}: {text}"


def _clock_rows(clocks: tuple[ClockAlignment, ...]) -> list[tuple[str, str]]:
    if len(clocks) <= CLOCK_RANKS_LISTED:
        return [(f"clock rank {c.rank}", _clock(c)) for c in clocks]
    by_method: dict[str, list[ClockAlignment]] = {}
    for c in clocks:
        by_method.setdefault(c.method, []).append(c)
    return [("clocks", _clock_summary(m, cs)) for m, cs in by_method.items()]


def straggler_line(c: CrossRankAnalysis, need_pct: float) -> str:
    """One sentence: who keeps the others waiting, by how much, and in which phase;
    ``need_pct``: the share a rank needed to be named (``RunAnalysis.straggler_need_pct``)."""
    s = c.straggler
    if s is None:
        return (
            f"no straggler: no rank causes {need_pct:.0f}% or more of the waiting for late ranks "
            f"at {STRAGGLER_MIN_STEP_PCT:.0f}% of a step or more"
        )
    mine = next((r for r in c.ranks if r.rank == s.rank), None)
    counts = f"{mine.last_count:,} of {mine.instances:,}" if mine else f"{s.last_share_pct:.0f}% of"
    text = (
        f"rank {s.rank} causes {s.lateness_share_pct:.0f}% of the waiting "
        f"({s.lateness_ms_per_step:,.2f} ms per step): last at {counts} collectives, "
        f"{s.lateness_avg_ms:,.2f} ms late on average"
    )
    if s.phase is None or s.phase_excess_ms is None:
        return text + "; no phase of it takes longer than on the others"
    where = f"in {s.phase}"
    if s.phase == OTHER:
        where = "outside the recorded phases (other)"
        where += f", {describe(s.between)}," if s.between else ""
    return text + f"; it spends {s.phase_excess_ms:,.2f} ms more per step {where} than the others"


def _summary_rows(c: CrossRankAnalysis, need_pct: float) -> list[tuple[str, str]]:
    rows = _clock_rows(c.clocks)
    rows.append(
        (
            "instances",
            f"{c.matched_instances:,} matched on every rank of their group "
            f"({c.measured_instances:,} in measured steps), {c.unmatched_instances:,} unmatched",
        )
    )
    rows.append(("straggler", straggler_line(c, need_pct)))
    imbalance = fmt(c.load_imbalance_pct, ".1f", "%")
    rows.append(("load imbalance", f"{imbalance} ((max - mean) / mean of busy time per step)"))
    if c.overlap is not None:
        o = c.overlap
        rows.append(
            (
                "overlap",
                f"gradient communication {o.comm_ms_per_step:,.2f} ms/step: "
                f"{o.hidden_ms_per_step:,.2f} ms hidden under backward ({o.hidden_pct:.1f}%), "
                f"{o.exposed_ms_per_step:,.2f} ms exposed after it (comm_wait)"
                + _transfer(o.exposed_transfer_ms_per_step),
            )
        )
    return rows


DIM_COLUMN = Column("dimension", align="left")
WAITS_COLUMNS = (
    Column("op", align="left", no_wrap=True),
    Column("tag", align="left"),
    Column("size", "B"),
    Column("instances"),
    Column("skew avg", "µs"),
    Column("skew max", "µs"),
    Column("wait avg", "µs"),
    Column("transfer avg", "µs"),
    Column("wait share", "%"),
)


def _waits_table(c: CrossRankAnalysis) -> Table:
    """Per op, tag and size, and per dimension where some group is not the world's."""
    by_dim = any(w.dim not in ("", "world") for w in c.waits)
    rows = tuple(
        (
            w.op,
            w.tag or NA,
            *((w.dim or NA,) if by_dim else ()),
            f"{w.nbytes:,}",
            f"{w.instances:,}",
            f"{w.skew_avg_us:,.1f}",
            f"{w.skew_max_us:,.1f}",
            f"{w.wait_avg_us:,.1f}",
            f"{w.transfer_avg_us:,.1f}",
            f"{w.wait_share_pct:.1f}",
        )
        for w in c.waits
    )
    columns = (*WAITS_COLUMNS[:2], DIM_COLUMN, *WAITS_COLUMNS[2:]) if by_dim else WAITS_COLUMNS
    return Table(
        "Waiting for the last rank versus transfer, per op and size (measured steps)",
        columns,
        rows,
        caption="on rank 0's clock; arrival = issue, or the completion of the rank's previous "
        "collective of the group if later; wait = last arrival - arrival; "
        "transfer = completion - last arrival; averages over instances and ranks",
    )


RANKS_COLUMNS = (
    Column("rank"),
    Column("last"),
    Column("last share", "%"),
    Column("lateness avg", "ms"),
    Column("lateness", "ms/step"),
    Column("lateness share", "%"),
    Column("wait", "ms/step"),
    Column("busy", "ms/step"),
)


def _ranks_table(c: CrossRankAnalysis) -> Table:
    rows = tuple(
        (
            str(r.rank),
            f"{r.last_count:,} of {r.instances:,}",
            f"{r.last_share_pct:.1f}",
            f"{r.lateness_avg_us / 1e3:,.2f}" if r.last_count else NA,
            f"{r.lateness_ms_per_step:,.2f}",
            f"{r.lateness_share_pct:.1f}",
            f"{r.wait_ms_per_step:,.2f}",
            f"{r.busy_ms_per_step:,.2f}",
        )
        for r in c.ranks
    )
    return Table(
        "Per rank (measured steps)",
        RANKS_COLUMNS,
        rows,
        caption=f"last: instances the rank arrived at last by more than "
        f"{c.tie_tolerance_us:,.0f} µs (share: of the instances with such a rank); lateness: "
        "how much later than the second-to-last; busy: the step less its waiting (comm_wait, "
        "blocking collectives): its phases and the time outside them (other)",
    )


def _ranks_blocks(analysis: RunAnalysis, c: CrossRankAnalysis) -> tuple[Block, ...]:
    """The per-rank table; beyond RANK_ROWS_LIMIT ranks, its slowest and fastest ranks by busy
    time and the distribution of its columns over every rank."""
    table = _ranks_table(c)
    if len(c.ranks) <= RANK_ROWS_LIMIT:
        return (table,)
    spreads = analysis.spreads.columns
    metrics = [
        RankMetric("busy", "ms/step", spreads["busy_ms_per_step"]),
        RankMetric("wait", "ms/step", spreads["wait_ms_per_step"]),
        RankMetric("lateness", "ms/step", spreads["lateness_ms_per_step"]),
        RankMetric("lateness share", "%", spreads["lateness_share_pct"]),
        RankMetric("last share", "%", spreads["last_share_pct"]),
    ]
    return condensed_blocks(analysis, table, [r.rank for r in c.ranks], metrics)


def cross_rank_section(analysis: RunAnalysis) -> Section | None:
    """The cross-rank part of the run report; None for a single-rank or probe-off run."""
    c = analysis.cross_rank
    if c is None:
        if analysis.probe and analysis.world_size > 1:
            why = Line("No cross-rank analysis: fewer than two ranks recorded events.")
            return Section("Across ranks", (why,))
        return None
    need_pct = analysis.straggler_need_pct or 0.0
    blocks: list[Block] = [Grid(tuple(_summary_rows(c, need_pct)))]
    if c.waits:
        blocks.append(_waits_table(c))
    if c.ranks:
        blocks.extend(_ranks_blocks(analysis, c))
    return Section("Across ranks: waiting versus transfer", tuple(blocks))


def render_cross_rank(analysis: RunAnalysis, console: Console) -> None:
    """Print the cross-rank sections; a single-rank or probe-off run prints nothing."""
    section = cross_rank_section(analysis)
    if section is not None:
        render_block(section, console)
