"""Formatting shared by the terminal views: numbers, key-value grids, section rules (byte sizes
and durations: events/units.py)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

REPORT_WIDTH = 120
"""Width of the report when stdout is not a terminal (logs, pipes)."""


ERROR_LINES = 4
"""Lines of a rank's error the terminal shows in the failures section (the page shows all)."""
NA = "n/a"


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    """Format a number with its unit, or ``n/a`` when it was not measured."""
    if value is None:
        return NA
    text = format(value, spec)
    return f"{text} {unit}" if unit else text


def fmt_count(value: float) -> str:
    """Counts averaged over ranks are whole numbers unless ranks disagree."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def fmt_calls(lowest: int, highest: int) -> str:
    """Calls of one rank: one number, or the range when the ranks made different counts
    (a mean such as 6.50 would read as a count no rank made)."""
    return f"{lowest:,}" if lowest == highest else f"{lowest:,}–{highest:,}"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def kv_grid(rows: list[tuple[str, str]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for key, value in rows:
        grid.add_row(Text(key), Text(value))
    return grid


def section(console: Console, title: str) -> None:
    console.print()
    console.rule(Text(title))


def report_console(width: int = REPORT_WIDTH) -> Console:
    """Markup off: run ids, hosts, commands and op names print as recorded, brackets too;
    ``width`` columns when stdout is not a terminal."""
    console = Console(highlight=False, markup=False)
    if console.is_terminal:
        return console
    return Console(highlight=False, markup=False, width=width)


SUITE_WIDTH = 150
"""Width of a suite's table when stdout is not a terminal: 12 columns, errors in the last."""


def suite_console() -> Console:
    """The report's console (markup off: errors and paths verbatim), wider off a terminal."""
    return report_console(SUITE_WIDTH)
