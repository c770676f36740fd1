"""`run` and `bench`: start ranks under the probe and record a run directory."""

from __future__ import annotations

from scalescope.cli.common import PASSTHROUGH, app, drive, needs_run_extra
from scalescope.cli.option_check import CheckedCommand
from scalescope.cli.params import options_command
from scalescope.commands.options.launching import BenchCommand, RunCommand


@app.command(cls=CheckedCommand, context_settings=PASSTHROUGH)
@options_command(RunCommand)
def run(options: RunCommand) -> None:
    """Start ranks of SCRIPT [ARGS] under the probe and record a run directory.

    Arguments after SCRIPT go to the script: scalescope run -n 2 train.py --epochs 1.
    Under srun, mpirun or torchrun, without -n, each task joins the launcher's world as one rank.
    """
    needs_run_extra("run")
    from scalescope.commands import run as journey

    drive(journey.run, options)


@app.command(cls=CheckedCommand)
@options_command(BenchCommand)
def bench(options: BenchCommand) -> None:
    """Data-parallel training of a built-in torchvision model, profiled."""
    needs_run_extra("bench")
    from scalescope.commands import run as journey

    drive(journey.bench, options)
