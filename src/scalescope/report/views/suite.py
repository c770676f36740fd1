"""A suite result as one document (the table, the failed runs' errors) on the terminal; its
JSON is its record's (events/suite.py)."""

from __future__ import annotations

from scalescope.events.suite import SuiteEntry, SuiteResult
from scalescope.report.document import (
    Block,
    Column,
    Document,
    Heading,
    Line,
    Preformatted,
    Table,
)
from scalescope.report.formatting import NA, fmt


def _pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}"


def _failed(e: SuiteEntry) -> bool:
    return e.status != "completed" or e.error is not None


def _throughput(e: SuiteEntry) -> str:
    if e.throughput is None or e.unit is None:
        return NA
    return f"{e.throughput:,.1f} {e.unit}/s"


def _column(name: str, unit: str = "", left: bool = False) -> Column:
    return Column(name, unit, "left" if left else "right", no_wrap=name != "status", min_width=6)


COLUMNS = (
    _column("workload", left=True), _column("ranks"), _column("size"), _column("time", "s"),
    _column("wall", "s"), _column("throughput", left=True), _column("eff.", "%"),
    _column("rank"), _column("window", "s"), _column("coll.", "%"), _column("data", "%"),
    _column("status", left=True),
)  # fmt: skip


def _entry_rows(e: SuiteEntry, first_of_workload: bool) -> list[tuple[str, ...]]:
    """The entry's figures and status on its first line, then one line per rank."""
    head = (
        e.workload if first_of_workload else "",
        str(e.ranks),
        f"{e.size:,}",
        fmt(e.time_s, ".3f"),
        fmt(e.wall_s, ".1f"),
        _throughput(e),
        _pct(None if e.efficiency is None else 100 * e.efficiency),
    )
    status = f"{e.status}: {e.error or NA}" if _failed(e) else "ok"
    rows = []
    for i, r in enumerate(e.per_rank or (None,)):
        own = (NA,) * 4 if r is None else (
            str(r.rank), f"{r.window_s:.2f}", _pct(r.collective_pct), _pct(r.data_pct)
        )  # fmt: skip
        rows.append((*(head if i == 0 else ("",) * len(head)), *own, status if i == 0 else ""))
    return rows


def suite_table(result: SuiteResult) -> Table:
    """One group of lines per entry; a failed entry's first line in red."""
    rows, styles, groups = [], [], []
    last = None
    for e in result.entries:
        lines = _entry_rows(e, e.workload != last)
        rows += lines
        styles += ["red" if _failed(e) else ""] + [""] * (len(lines) - 1)
        groups.append(len(lines))
        last = e.workload
    sizes = "quick" if result.quick else "full"
    return Table(
        f"Suite ({sizes} sizes)",
        COLUMNS,
        tuple(rows),
        styles=tuple(styles),
        groups=tuple(groups),
        caption="time: the workload's measured part (warm-up left out); wall: launch to last "
        "exit; eff.: scaling efficiency, (throughput / throughput at the fewest ranks) / (ranks "
        "ratio); per rank: its window (the measured steps, or all it recorded), the share of "
        "it with a collective in flight (with DDP partly under backward) and in the DataLoader",
    )


def suite_document(result: SuiteResult) -> Document:
    """The table, each failed run's error once more in full beside its run directory."""
    failed = tuple(
        f"{e.workload} on {e.ranks} ranks {e.status}: {e.error or NA} ({e.run_dir})"
        for e in result.entries
        if _failed(e)
    )
    blocks: list[Block] = [Heading(f"scalescope suite: {result.suite_dir}", rule=True)]
    blocks.append(suite_table(result))
    if failed:
        blocks.append(Preformatted(failed, styles=("red",) * len(failed)))
    if result.interrupted:
        blocks.append(Line("Interrupted: the workloads after the last row did not run."))
    blocks.append(Line(f"runs: scalescope report {result.suite_dir}/WORKLOAD-nRANKS"))
    return Document(f"scalescope suite {result.suite_dir}", tuple(blocks))
