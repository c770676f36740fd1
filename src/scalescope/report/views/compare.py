"""A RunComparison as a document (tables with B / A ratios, for the terminal and the compare
page) and as JSON (``scalescope.compare/2``, documented in docs/report-schema.md)."""

from __future__ import annotations

import msgspec
from rich.console import Console

from scalescope.analyze.runs.compare import CrossRankComparison, Pair, RunComparison, SizeKey
from scalescope.events.units import number_ranges
from scalescope.report.document import (
    Block,
    Column,
    Document,
    Grid,
    Heading,
    Line,
    Section,
    Table,
)
from scalescope.report.formatting import NA, fmt, fmt_count
from scalescope.report.media.terminal import render_document

COMPARE_SCHEMA = "scalescope.compare/2"


def comparison_json(comparison: RunComparison) -> bytes:
    """The comparison as JSON with its schema version first; None fields become ``null``."""
    document = {"schema": COMPARE_SCHEMA, **msgspec.to_builtins(comparison)}
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"


def fmt_ratio(ratio: float | None) -> str:
    return NA if ratio is None else f"{ratio:.2f}x"


Value = float | int | str | None
Cell = tuple[str, Value]
"""A cell's text and the number behind it."""


def _pair(p: Pair, spec: str) -> list[Cell]:
    return [(fmt(p.a, spec), p.a), (fmt(p.b, spec), p.b), (fmt_ratio(p.ratio), p.ratio)]


def _count(p: Pair) -> list[Cell]:
    counts = [(NA if v is None else fmt_count(v), v) for v in (p.a, p.b)]
    return [*counts, (fmt_ratio(p.ratio), p.ratio)]


def _label(text: str) -> Cell:
    return (text, text)


def _columns(first: tuple[Column, ...], pairs: tuple[str, ...]) -> tuple[Column, ...]:
    """``first``, then A, B and B/A for each of ``pairs``."""
    prefixes = (f"{name} " if name else "" for name in pairs)
    return (*first, *(Column(f"{p}{side}") for p in prefixes for side in ("A", "B", "B/A")))


def _table(title: str, columns: tuple[Column, ...], rows: list[list[Cell]], **kw: str) -> Table:
    cells = tuple(tuple(text for text, _ in row) for row in rows)
    values = tuple(tuple(value for _, value in row) for row in rows)
    return Table(title, columns, cells, values, **kw)


def _first(*names: str) -> tuple[Column, ...]:
    return tuple(Column(name, align="left", no_wrap=True) for name in names)


def _facts(c: RunComparison) -> Table:
    rows = (
        ("run", c.a.run_id, c.b.run_id),
        ("workload", c.a.workload, c.b.workload),
        ("command", " ".join(c.a.command) or NA, " ".join(c.b.command) or NA),
        ("ranks", str(c.a.world_size), str(c.b.world_size)),
        ("ranks per node", str(c.a.nproc_per_node), str(c.b.nproc_per_node)),
        ("hosts", str(c.a.num_hosts), str(c.b.num_hosts)),
        ("status", c.a.status, c.b.status),
        ("warm-up steps", str(c.a.warmup_steps), str(c.b.warmup_steps)),
        ("measured steps", fmt(c.a.measured_steps, ","), fmt(c.b.measured_steps, ",")),
    )
    return Table("Runs", tuple(Column(name, align="left") for name in ("", "A", "B")), rows)


def _throughput(c: RunComparison) -> Section:
    rows = [
        [_label("throughput (samples/s)"), *_pair(c.samples_per_s, ",.1f")],
        [_label("mean step (ms)"), *_pair(c.mean_step_ms, ",.2f")],
    ]
    blocks: list[Block] = [_table("", _columns(_first(""), ("",)), rows)]
    if c.phases:
        phases = [[_label(p.phase), *_pair(p.mean_ms, ",.2f")] for p in c.phases]
        title = "Step phases (mean ms per step, averaged over ranks)"
        blocks.append(_table(title, _columns(_first("phase"), ("",)), phases))
    return Section("Throughput and step time", tuple(blocks))


def _only(keys: tuple[SizeKey, ...]) -> str:
    return ", ".join(f"{k.op} {k.nbytes:,} B" for k in keys)


def _sizes(c: RunComparison) -> Section:
    if not (c.sizes or c.sizes_only_a or c.sizes_only_b):
        return Section("Collectives", (Line("No collectives were recorded in either run."),))
    rows = [
        [
            _label(s.op),
            (f"{s.nbytes:,}", s.nbytes),
            *_count(s.calls_per_rank),
            *_pair(s.time_avg_us, ",.1f"),
            *_pair(s.busbw_gbps, ".2f"),
        ]
        for s in c.sizes
    ]
    notes = [f"only in A: {_only(c.sizes_only_a)}"] if c.sizes_only_a else []
    notes += [f"only in B: {_only(c.sizes_only_b)}"] if c.sizes_only_b else []
    notes += [
        f"{side}'s counts: steps {number_ranges(f.windows)} only (--record summary)"
        for side, f in (("A", c.a), ("B", c.b))
        if f.windows
    ]
    columns = _columns(_first("op", "size (B)"), ("count", "avg (µs)", "busbw (GB/s)"))
    title = "Collectives by message size (sizes in both runs)"
    caption = "; ".join(["count per rank; GB = 1e9 B", *notes])
    return Section("Collectives", (_table(title, columns, rows, caption=caption),))


def _straggler(rank: int | None) -> str:
    return "none" if rank is None else f"rank {rank}"


def _waits(x: CrossRankComparison) -> Table:
    rows = [
        [
            _label(w.op),
            _label(w.tag or NA),
            (f"{w.nbytes:,}", w.nbytes),
            *_pair(w.wait_avg_us, ",.1f"),
            *_pair(w.transfer_avg_us, ",.1f"),
        ]
        for w in x.waits
    ]
    columns = _columns(_first("op", "tag", "size (B)"), ("wait avg (µs)", "transfer avg (µs)"))
    return _table("Waiting versus transfer (op, tag and size in both runs)", columns, rows)


def _cross_rank(c: RunComparison) -> Section:
    x = c.cross_rank
    if x is None:
        line = Line("No cross-rank comparison: a run has fewer than two ranks with events.")
        return Section("Across ranks", (line,))
    straggler = f"A: {_straggler(x.straggler_a)}; B: {_straggler(x.straggler_b)}"
    rows = [
        [_label("wait in collectives (ms/step)"), *_pair(x.wait_ms_per_step, ",.2f")],
        [_label("busy (ms/step)"), *_pair(x.busy_ms_per_step, ",.2f")],
        [_label("load imbalance (%)"), *_pair(x.load_imbalance_pct, ".1f")],
        [_label("comm hidden under backward (ms/step)"), *_pair(x.hidden_ms_per_step, ",.2f")],
        [_label("comm exposed (ms/step)"), *_pair(x.exposed_ms_per_step, ",.2f")],
        [_label("step with the best fix, replayed (ms)"), *_pair(x.best_fix_step_ms, ",.2f")],
    ]
    title = "Across ranks (per rank figures averaged over ranks)"
    blocks: list[Block] = [
        Grid((("straggler", straggler),)),
        _table(title, _columns(_first(""), ("",)), rows),
    ]
    if x.waits:
        blocks.append(_waits(x))
    return Section("Across ranks", tuple(blocks))


def comparison_heading(c: RunComparison) -> Heading:
    return Heading(
        f"scalescope compare: A = {c.a.run_id}, B = {c.b.run_id} (ratios B/A)", rule=True
    )


def comparison_document(c: RunComparison) -> Document:
    """Run B against run A; every ratio is B / A."""
    blocks = (comparison_heading(c), _facts(c), _throughput(c), _sizes(c), _cross_rank(c))
    return Document(f"scalescope compare {c.a.run_id} vs {c.b.run_id}", blocks)


def render_comparison(comparison: RunComparison, console: Console) -> None:
    """Print run B against run A; every ratio is B / A."""
    render_document(comparison_document(comparison), console)
