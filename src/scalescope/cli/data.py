"""`data pack|stage|bench`: the input pipeline's shards."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import app, drive

data_app = typer.Typer(
    help="Input pipeline: pack an image folder into shards, stage them, measure images/s.",
    no_args_is_help=True,
)
app.add_typer(data_app, name="data")


@data_app.command("pack")
def data_pack(
    folder: Path = typer.Argument(..., help="An ImageFolder: FOLDER/<class>/<image>."),
    out: Path = typer.Argument(..., help="A new (or empty) directory for the shards."),
    shard_size: str = typer.Option("256MB", help="Bytes per shard, e.g. 256MB, 1GiB."),
    seed: int = typer.Option(0, help="Seed of the image order (classes mixed in shards)."),
) -> None:
    """Pack an image folder into tar shards (WebDataset layout) with a manifest."""
    from scalescope.commands import data as journey

    drive(
        journey.pack, journey.PackCommand(folder=folder, out=out, shard_size=shard_size, seed=seed)
    )


@data_app.command("stage")
def data_stage(
    shards: Path = typer.Argument(..., help="A shard directory written by `data pack`."),
    dest: Path = typer.Argument(..., help="Node-local directory, e.g. /dev/shm/train."),
    timeout: float = typer.Option(3600.0, help="Seconds the other ranks wait for the copy."),
) -> None:
    """Copy shards to node-local disk or RAM, once per node under Slurm, mpirun or torchrun."""
    from scalescope.commands import data as journey

    drive(journey.stage, journey.StageCommand(shards=shards, dest=dest, timeout_s=timeout))


@data_app.command("bench")
def data_bench(
    paths: list[Path] = typer.Argument(..., help="Image folders and/or shard directories."),
    workers: str = typer.Option("0,2", help="Loader worker counts to try, e.g. 0,2,4."),
    images: int = typer.Option(512, help="Images timed per run.", min=1),
    batch_size: int = typer.Option(32, help="Images per batch.", min=1),
    image_size: int = typer.Option(224, help="Crop size of the training transforms.", min=8),
    rounds: int = typer.Option(3, help="Interleaved rounds; the median is reported.", min=1),
    cold: bool = typer.Option(
        False,
        "--cold",
        help="Drop the data's files from the page cache before every run (no root needed): "
        "a first epoch, a data set bigger than RAM, a parallel file system.",
    ),
) -> None:
    """Images/s of folders vs shards through the bench's decode + training transforms."""
    from scalescope.commands import data as journey

    drive(journey.bench, journey.DataBenchCommand(
        paths=tuple(paths), workers=workers, images=images, batch_size=batch_size,
        image_size=image_size, rounds=rounds, cold=cold,
    ))  # fmt: skip
