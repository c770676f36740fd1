"""Render a suite result: one terminal table in the report's style, and JSON
(``scalescope.suite/1``, documented in docs/suite.md)."""

from __future__ import annotations

from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.analyze.suite import SuiteEntry, SuiteResult
from scalescope.events.files import SUITE_FILE
from scalescope.report.formatting import NA, fmt, report_console

SUITE_SCHEMA = "scalescope.suite/1"
SUITE_WIDTH = 150
"""Width of the table when stdout is not a terminal: 12 columns, errors in the last."""


def suite_console() -> Console:
    """The report's console (markup off: errors and paths verbatim), wider off a terminal."""
    return report_console(SUITE_WIDTH)


def _pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}"


def _status(e: SuiteEntry) -> Text:
    if e.status == "completed" and e.error is None:
        return Text("ok")
    return Text(f"{e.status}: {e.error or NA}", style="red")


def _throughput(e: SuiteEntry) -> str:
    if e.throughput is None or e.unit is None:
        return NA
    return f"{e.throughput:,.1f} {e.unit}/s"


COLUMNS = (
    "workload", "ranks", "size", "time (s)", "wall (s)", "throughput", "eff. (%)",
    "rank", "window (s)", "coll. (%)", "data (%)", "status",
)  # fmt: skip
LEFT = ("workload", "throughput", "status")


def _entry_rows(table: Table, e: SuiteEntry, first_of_workload: bool) -> None:
    """The entry's figures on its first line, then one line per rank."""
    head = [
        Text(e.workload if first_of_workload else ""),
        str(e.ranks),
        f"{e.size:,}",
        fmt(e.time_s, ".3f"),
        fmt(e.wall_s, ".1f"),
        _throughput(e),
        _pct(None if e.efficiency is None else 100 * e.efficiency),
    ]
    splits = e.per_rank or (None,)
    for i, r in enumerate(splits):
        cells = head if i == 0 else [""] * len(head)
        own = [NA] * 4 if r is None else [
            str(r.rank), f"{r.window_s:.2f}", _pct(r.collective_pct), _pct(r.data_pct)
        ]  # fmt: skip
        table.add_row(*cells, *own, _status(e) if i == 0 else "", end_section=i == len(splits) - 1)


def suite_table(result: SuiteResult) -> Table:
    sizes = "quick" if result.quick else "full"
    table = Table(title=f"Suite ({sizes} sizes)", title_justify="left")
    for col in COLUMNS:
        table.add_column(
            col, justify="left" if col in LEFT else "right", no_wrap=col != "status", min_width=6
        )
    last = None
    for e in result.entries:
        _entry_rows(table, e, e.workload != last)
        last = e.workload
    table.caption = (
        "time: the workload's measured part (warm-up left out); wall: launch to last exit; "
        "eff.: scaling efficiency, (throughput / throughput at the fewest ranks) / (ranks "
        "ratio); per rank: its window (the measured steps, or all it recorded), the share of "
        "it with a collective in flight (with DDP partly under backward) and in the DataLoader"
    )
    table.caption_justify = "left"
    return table


def _failures(result: SuiteResult, console: Console) -> None:
    """Each failed run's error once more in full, one line each, beside its run directory."""
    for e in result.entries:
        if e.status != "completed" or e.error:
            line = f"{e.workload} on {e.ranks} ranks {e.status}: {e.error or NA} ({e.run_dir})"
            console.print(Text(line, style="red"), soft_wrap=True)


def render_suite(result: SuiteResult, console: Console) -> None:
    console.rule(Text(f"scalescope suite: {result.suite_dir}"))
    console.print(suite_table(result))
    _failures(result, console)
    if result.interrupted:
        console.print(Text("Interrupted: the workloads after the last row did not run."))
    console.print(Text(f"runs: scalescope report {result.suite_dir}/WORKLOAD-nRANKS"))


def _entry_json(e: SuiteEntry) -> dict:
    doc = msgspec.to_builtins(e)
    doc["throughput_unit"] = f"{e.unit}/s" if e.unit else None
    doc["per_rank"] = [
        {**msgspec.to_builtins(r), "collective_pct": r.collective_pct, "data_pct": r.data_pct}
        for r in e.per_rank
    ]
    return doc


def suite_json(result: SuiteResult) -> bytes:
    """The result as JSON with its schema version first; None fields become ``null``."""
    body = msgspec.to_builtins(result)
    body["entries"] = [_entry_json(e) for e in result.entries]
    document = {"schema": SUITE_SCHEMA, **body}
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"


def write_suite_json(result: SuiteResult, *paths: Path | None) -> list[Path]:
    data = suite_json(result)
    written = []
    for path in paths:
        if path is not None:
            path.write_bytes(data)
            written.append(path)
    return written


def load_suite(path: Path) -> SuiteResult:
    """The result in suite directory ``path`` (its suite.json), or in the JSON file ``path``
    (suite.json or a copy written by ``--json``); ValueError naming the file otherwise."""
    file = path / SUITE_FILE if path.is_dir() else path
    try:
        body = msgspec.json.decode(file.read_bytes())
    except FileNotFoundError:
        raise ValueError(f"{path}: no {SUITE_FILE} (not a scalescope suite)") from None
    except (OSError, msgspec.DecodeError) as exc:
        raise ValueError(f"{file}: not a suite result ({exc})") from None
    if not isinstance(body, dict) or body.get("schema") != SUITE_SCHEMA:
        raise ValueError(f"{file}: not a suite result (no schema {SUITE_SCHEMA!r})")
    try:
        return msgspec.convert(body, SuiteResult)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{file}: malformed suite result ({exc})") from None
