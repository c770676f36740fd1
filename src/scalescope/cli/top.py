"""`top`: the live view of a run directory, in progress or finished."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import app, fail
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
    from rich.console import Console

    from scalescope.events.run import RunDirError
    from scalescope.report.live_top import LiveTop, watch

    if (run_dir is None) == (connect is None):
        fail("give a run directory or --connect HOST:PORT (one of them)")
    console = Console(highlight=False)
    try:
        if connect:
            view = store_top(connect)
        else:
            view = LiveTop(run_dir, finding_every_s=0.0 if once else FINDING_EVERY_S)
        if once:
            console.print(view.frame())
            raise typer.Exit(0)
        raise typer.Exit(watch(view, console))
    except (RunDirError, ValueError) as exc:
        fail(str(exc))


def store_top(address: str):  # noqa: ANN201
    """The view through the store at ``address``; a one-line error when none answers."""
    from scalescope.launch.live_channel import Channel, connect
    from scalescope.report.live_store_top import StoreTop, parse_address

    host, port = parse_address(address)
    try:
        return StoreTop(Channel(connect(host, port, timeout_s=CONNECT_WAIT_S)))
    except RuntimeError as exc:  # torch's DistStoreError and DistNetworkError among them
        raise ValueError(f"no store answers at {address}: {str(exc).splitlines()[0]}") from None


CONNECT_WAIT_S = 5.0
FINDING_EVERY_S = 10.0
