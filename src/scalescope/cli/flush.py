"""`flush`: ask a running job's ranks to write what they hold now."""

from __future__ import annotations

from scalescope.cli.common import app, drive
from scalescope.cli.option_check import CheckedCommand
from scalescope.cli.params import options_command
from scalescope.commands.options.reading import FlushCommand


@app.command(cls=CheckedCommand)
@options_command(FlushCommand)
def flush(options: FlushCommand) -> None:
    """Ask a running job's ranks to write their events now and, at --record summary, their
    flight recorders' summarised steps (events/window-*: the what-if replays them), as a hang
    does. A run directory on this node, or --connect HOST:PORT for every rank through the
    job's store (sealed with your key)."""
    from scalescope.commands import flush as journey

    drive(journey.flush, options)
