"""`tune`: search the knobs of a workload by short real trials."""

from __future__ import annotations

from scalescope.cli.common import PASSTHROUGH, app, drive, needs_run_extra
from scalescope.cli.option_check import CheckedCommand
from scalescope.cli.params import options_command
from scalescope.commands.options.launching import TuneCommand


@app.command(cls=CheckedCommand, context_settings=PASSTHROUGH)
@options_command(TuneCommand)
def tune(options: TuneCommand) -> None:
    """Search the knobs of SCRIPT [ARGS] (or --bench MODEL) by short real trials.

    The workload as given runs first (the baseline); the diagnosis of it proposes the next
    trials; then the sampler. Then the baseline and the top --confirm configurations run
    again, interleaved, and the best is named by its median samples/s. Ctrl-C ends the study
    and still prints the table.
    """
    needs_run_extra("tune")
    from scalescope.commands import tune as journey

    drive(journey.tune, options)
