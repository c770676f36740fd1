"""Render a suite result: one terminal table in the report's style, and JSON
(``scalescope.suite/1``, documented in docs/suite.md)."""

from __future__ import annotations

from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.analyze.rank_split import RankSplit
from scalescope.analyze.suite import SuiteEntry, SuiteResult
from scalescope.report.terminal import NA, fmt

SUITE_SCHEMA = "scalescope.suite/1"


def _rank_line(r: RankSplit) -> str:
    collective = fmt(r.collective_pct, ".0f", "%")
    data = fmt(r.data_pct, ".0f", "%")
    return f"r{r.rank}: {r.window_s:.2f} s, coll {collective}, data {data}"


def _status(e: SuiteEntry) -> Text:
    if e.status == "completed" and e.error is None:
        return Text("ok")
    return Text(f"{e.status}: {e.error or NA}", style="red")


def _throughput(e: SuiteEntry) -> str:
    if e.throughput is None or e.unit is None:
        return NA
    return f"{e.throughput:,.1f} {e.unit}/s"


def suite_table(result: SuiteResult) -> Table:
    sizes = "quick" if result.quick else "full"
    table = Table(title=f"Suite ({sizes} sizes)", title_justify="left")
    for col in ("workload", "ranks", "size", "time (s)", "wall (s)", "throughput"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    table.add_column("per rank: window, in collectives, data wait", justify="left")
    table.add_column("scaling eff.", justify="right")
    table.add_column("status", justify="left")
    last = None
    for e in result.entries:
        table.add_row(
            Text(e.workload) if e.workload != last else Text(""),
            str(e.ranks),
            f"{e.size:,}",
            fmt(e.time_s, ".3f"),
            fmt(e.wall_s, ".1f"),
            _throughput(e),
            Text("\n".join(_rank_line(r) for r in e.per_rank) or NA),
            fmt(None if e.efficiency is None else 100 * e.efficiency, ".0f", "%"),
            _status(e),
        )
        last = e.workload
    table.caption = (
        "time: the workload's measured part (warm-up left out); wall: launch to last exit; "
        "per rank: the measured steps (or all recorded events) with the share of it a "
        "collective was in flight (with DDP partly under backward) and in the DataLoader; "
        "scaling eff. = (throughput / throughput at the fewest ranks) / (ranks ratio)"
    )
    table.caption_justify = "left"
    return table


def render_suite(result: SuiteResult, console: Console) -> None:
    console.rule(Text(f"scalescope suite: {result.suite_dir}"))
    console.print(suite_table(result))
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
