"""``scalescope analyze`` of foreign traces: where the events came from, and Horovod's tables.

``render_ingest_source`` says which format was found, which files were read and what was
wrong with them; ``render_horovod_phases`` prints the per-activity table Horovod users
read in chrome://tracing (wall duration, self time, average wall duration, occurrences)
and the negotiation (wait) versus transfer table by op and message size.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.ingest import IngestResult
from scalescope.report.formatting import fmt_bytes

NA = "n/a"
MAX_FILES_SHOWN = 8


def render_ingest_source(result: IngestResult, console: Console) -> None:
    """Format found, files read (the first few), and every problem, one per line."""
    files = [Path(f).name for f in result.files]
    shown = ", ".join(files[:MAX_FILES_SHOWN])
    if len(files) > MAX_FILES_SHOWN:
        shown += f", ... ({len(files)} files)"
    console.print(Text.assemble(("Format: ", "bold"), result.format_name))
    console.print(Text.assemble(("Read: ", "bold"), shown or NA))
    for problem in result.problems:
        console.print(Text.assemble(("problem: ", "bold yellow"), problem))


def _phase_table(result: IngestResult) -> Table:
    table = Table(title="Horovod activities (coordinator timeline)", title_justify="left")
    table.add_column("phase", no_wrap=True)
    for name in ("wall duration ms", "self time ms", "avg wall ms", "occurrences"):
        table.add_column(name, justify="right")
    for row in result.horovod_phases:
        table.add_row(
            Text(row.phase),
            f"{row.wall_ms:,.3f}",
            f"{row.self_ms:,.3f}",
            f"{row.avg_wall_ms:,.3f}",
            f"{row.occurrences:,}",
        )
    return table


def _wait_table(result: IngestResult) -> Table:
    table = Table(
        title="Negotiation (waiting for ranks) versus transfer, per instance",
        title_justify="left",
    )
    table.add_column("op", no_wrap=True)
    table.add_column("tag")
    for name in ("message", "instances", "wait avg ms", "wait max ms", "transfer avg ms", "wait %"):
        table.add_column(name, justify="right")
    for row in result.horovod_waits:
        table.add_row(
            Text(row.op),
            Text(row.tag),
            fmt_bytes(row.nbytes),
            f"{row.instances:,}",
            f"{row.skew_avg_us / 1e3:,.3f}",
            f"{row.skew_max_us / 1e3:,.3f}",
            f"{row.transfer_avg_us / 1e3:,.3f}",
            f"{row.wait_share_pct:.1f}",
        )
    return table


def render_horovod_phases(result: IngestResult, console: Console) -> None:
    """Horovod's per-activity table, then wait versus transfer; nothing for other formats."""
    if not result.horovod_phases:
        return
    console.print(_phase_table(result))
    if result.horovod_waits:
        console.print()
        console.print(_wait_table(result))
