"""`data pack|stage|bench`: the input pipeline's shards."""

from __future__ import annotations

import typer

from scalescope.cli.common import app, drive, needs_run_extra
from scalescope.cli.params import options_command
from scalescope.commands.options.data import DataBenchCommand, PackCommand, StageCommand

data_app = typer.Typer(
    help="Input pipeline: pack an image folder into shards, stage them, measure images/s.",
    no_args_is_help=True,
)
app.add_typer(data_app, name="data")


@data_app.command("pack")
@options_command(PackCommand)
def data_pack(options: PackCommand) -> None:
    """Pack an image folder into tar shards (WebDataset layout) with a manifest."""
    needs_run_extra("data pack")
    from scalescope.commands import data as journey

    drive(journey.pack, options)


@data_app.command("stage")
@options_command(StageCommand)
def data_stage(options: StageCommand) -> None:
    """Copy shards to node-local disk or RAM, once per node under Slurm, mpirun or torchrun."""
    from scalescope.commands import data as journey

    drive(journey.stage, options)


@data_app.command("bench")
@options_command(DataBenchCommand)
def data_bench(options: DataBenchCommand) -> None:
    """Images/s of folders vs shards through the bench's decode + training transforms."""
    needs_run_extra("data bench")
    from scalescope.commands import data as journey

    drive(journey.bench, options)
