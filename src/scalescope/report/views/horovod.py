"""``scalescope analyze`` of foreign traces: where the events came from, and Horovod's tables.

``ingest_source_document`` says which format was found, which files were read and what was
wrong with them; ``horovod_document`` holds the per-activity table Horovod users read in
chrome://tracing (wall duration, self time, average wall duration, occurrences) and the
negotiation (wait) versus transfer table by op and message size.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from scalescope.events.units import fmt_bytes, fmt_ms
from scalescope.ingest import IngestResult
from scalescope.report.document import Block, Column, Document, Line, Table
from scalescope.report.formatting import NA
from scalescope.report.media.terminal import render_document

MAX_FILES_SHOWN = 8
PHASE_COLUMNS = (
    Column("phase", align="left", no_wrap=True),
    *(Column(name) for name in ("wall duration ms", "self time ms", "avg wall ms", "occurrences")),
)
WAIT_COLUMNS = (
    Column("op", align="left", no_wrap=True),
    Column("tag", align="left"),
    *(
        Column(name)
        for name in (
            "message", "instances", "wait avg ms", "wait max ms", "transfer avg ms", "wait %",
        )
    ),
)  # fmt: skip


def ingest_source_document(result: IngestResult) -> Document:
    """Format found, files read (the first few), and every problem, one per line."""
    files = [Path(f).name for f in result.files]
    shown = ", ".join(files[:MAX_FILES_SHOWN])
    if len(files) > MAX_FILES_SHOWN:
        shown += f", ... ({len(files)} files)"
    blocks = (
        Line(result.format_name, label="Format:"),
        Line(shown or NA, label="Read:"),
        *(Line(problem, label="problem:", style="bold yellow") for problem in result.problems),
    )
    return Document("scalescope analyze: source", blocks)


def render_ingest_source(result: IngestResult, console: Console) -> None:
    render_document(ingest_source_document(result), console)


def _phase_table(result: IngestResult) -> Table:
    phases = result.horovod_phases
    rows = tuple(
        (
            p.phase,
            fmt_ms(p.wall_ms, 3),
            fmt_ms(p.self_ms, 3),
            fmt_ms(p.avg_wall_ms, 3),
            f"{p.occurrences:,}",
        )
        for p in phases
    )
    values = tuple((p.phase, p.wall_ms, p.self_ms, p.avg_wall_ms, p.occurrences) for p in phases)
    return Table("Horovod activities (coordinator timeline)", PHASE_COLUMNS, rows, values)


def _wait_table(result: IngestResult) -> Table:
    waits = result.horovod_waits
    rows = tuple(
        (
            w.op,
            w.tag,
            fmt_bytes(w.nbytes),
            f"{w.instances:,}",
            fmt_ms(w.skew_avg_us / 1e3, 3),
            fmt_ms(w.skew_max_us / 1e3, 3),
            fmt_ms(w.transfer_avg_us / 1e3, 3),
            f"{w.wait_share_pct:.1f}",
        )
        for w in waits
    )
    values = tuple(
        (w.op, w.tag, w.nbytes, w.instances, w.skew_avg_us / 1e3, w.skew_max_us / 1e3,
         w.transfer_avg_us / 1e3, w.wait_share_pct)
        for w in waits
    )  # fmt: skip
    title = "Negotiation (waiting for ranks) versus transfer, per instance"
    return Table(title, WAIT_COLUMNS, rows, values)


def horovod_document(result: IngestResult) -> Document:
    """Horovod's per-activity table, then wait versus transfer; empty for other formats."""
    blocks: list[Block] = [_phase_table(result)] if result.horovod_phases else []
    if blocks and result.horovod_waits:
        blocks += [Line(""), _wait_table(result)]
    return Document("Horovod timeline", tuple(blocks))


def render_horovod_phases(result: IngestResult, console: Console) -> None:
    render_document(horovod_document(result), console)
