"""`top`: the live view of a run directory, in progress or finished."""

from __future__ import annotations

from scalescope.cli.common import app, drive
from scalescope.cli.option_check import CheckedCommand
from scalescope.cli.params import options_command
from scalescope.commands.options.reading import TopCommand


@app.command(cls=CheckedCommand)
@options_command(TopCommand)
def top(options: TopCommand) -> None:
    """Watch a run while it trains: throughput, each rank's step, its phases, its waiting and
    its share on a CPU, the straggler, the first finding so far, dead or silent ranks,
    starting ranks with their stage. q or Ctrl-C quits."""
    from scalescope.commands import top as journey

    drive(journey.top, options)
