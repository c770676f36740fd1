"""`project`: the performance model to more nodes or other hardware."""

from __future__ import annotations

from scalescope.cli.common import app, drive
from scalescope.cli.params import options_command
from scalescope.commands.options.reading import ProjectCommand


@app.command()
@options_command(ProjectCommand)
def project(options: ProjectCommand) -> None:
    """Project step time, throughput and epoch time to more nodes or other hardware.

    Also kept in RUN_DIR/projection.json for the run's dashboard (report RUN_DIR --html).
    """
    from scalescope.commands import project as journey

    drive(journey.project, options)
