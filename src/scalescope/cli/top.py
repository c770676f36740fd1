"""`top`: the live view of a run directory, in progress or finished."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import app, drive
from scalescope.cli.option_check import CheckedCommand


@app.command(cls=CheckedCommand)
def top(
    run_dir: Path | None = typer.Argument(
        None, help="A run directory (of run, bench, a scale size)."
    ),
    connect: str | None = typer.Option(
        None,
        "--connect",
        metavar="HOST:PORT",
        help="Watch through the job's store instead (MASTER_ADDR:MASTER_PORT under srun or "
        "mpirun, the --rdzv-endpoint on several nodes): from any node, no run directory.",
    ),
    once: bool = typer.Option(False, "--once", help="Print the view once and exit."),
) -> None:
    """Watch a run while it trains: throughput, each rank's step and its phases, the straggler,
    the first finding so far, dead or silent ranks, starting ranks with their stage. q or
    Ctrl-C quits."""
    from scalescope.commands import top as journey

    drive(journey.top, journey.TopCommand(run_dir=run_dir, connect=connect, once=once))
