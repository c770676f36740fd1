"""`top`: the live view of a run directory, in progress or finished."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import app, fail
from scalescope.cli.option_check import CheckedCommand


@app.command(cls=CheckedCommand)
def top(
    run_dir: Path = typer.Argument(..., help="A run directory (of run, bench, a scale size)."),
    once: bool = typer.Option(False, "--once", help="Print the view once and exit."),
) -> None:
    """Watch a run while it trains: throughput, each rank's step and its phases, the straggler,
    the first finding so far, dead or silent ranks, starting ranks with their stage. q or
    Ctrl-C quits."""
    from rich.console import Console

    from scalescope.events.run import RunDirError
    from scalescope.report.live_top import LiveTop, watch

    console = Console(highlight=False)
    try:
        if once:
            console.print(LiveTop(run_dir, finding_every_s=0.0).frame())
            raise typer.Exit(0)
        raise typer.Exit(watch(run_dir, console))
    except RunDirError as exc:
        fail(str(exc))
