"""`run` and `bench`: start ranks under the probe and record a run directory."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import NPROC, PASSTHROUGH, app, drive, fail
from scalescope.cli.launch_options import ALL_GROUPS, with_launch_options
from scalescope.cli.option_check import CheckedCommand
from scalescope.commands.run import LaunchFlags


@app.command(cls=CheckedCommand, context_settings=PASSTHROUGH)
@with_launch_options(*ALL_GROUPS)
def run(
    ctx: typer.Context,
    script: str = typer.Argument(..., help="Training script (or module with -m)."),
    nproc_per_node: int | None = NPROC,
    module: bool = typer.Option(False, "--module", "-m", help="SCRIPT is a module name."),
    warmup_steps: int = typer.Option(1, help="Steps left out of the statistics.", min=0),
    *,
    launch: LaunchFlags,
) -> None:
    """Start ranks of SCRIPT [ARGS] under the probe and record a run directory.

    Arguments after SCRIPT go to the script: scalescope run -n 2 train.py --epochs 1.
    Under srun, mpirun or torchrun, without -n, each task joins the launcher's world as one rank.
    """
    from scalescope.commands import run as journey

    drive(journey.run, journey.RunCommand(
        script=script, module=module, args=tuple(ctx.args), nproc_per_node=nproc_per_node,
        warmup_steps=warmup_steps, launch=launch,
    ))  # fmt: skip


@app.command(cls=CheckedCommand)
@with_launch_options(*ALL_GROUPS)
def bench(
    model: str = typer.Argument(..., help="A torchvision classifier: resnet18, resnet50, ..."),
    nproc_per_node: int | None = NPROC,
    batch_size: int | None = typer.Option(
        None, help="Images per rank per step (default 32).", min=1
    ),
    global_batch: int | None = typer.Option(
        None, help="Images per step over all ranks (split evenly), instead of --batch-size.", min=1
    ),
    recipe: str | None = typer.Option(
        None, help="Large-batch recipe: goyal or lars (LR scaling, warmup, optimizer)."
    ),
    image_size: int = typer.Option(224, help="Height and width of the images.", min=8),
    steps: int | None = typer.Option(None, help="Steps to run (default 50).", min=1),
    epochs: int | None = typer.Option(None, help="Epochs to run instead of --steps.", min=1),
    warmup_steps: int = typer.Option(5, help="Steps left out of the statistics.", min=0),
    lr: float | None = typer.Option(
        None, help="SGD learning rate (default 0.01); with --recipe, its base rate."
    ),
    channels_last: bool = typer.Option(False, help="Use the channels_last memory format."),
    bf16: bool = typer.Option(False, help="bfloat16 autocast."),
    bucket_cap_mb: float = typer.Option(25.0, help="DDP bucket size (MB).", min=0.0),
    fsdp: bool = typer.Option(
        False, help="Shard with FSDP2 (fully_shard on each block, then the model) instead of DDP."
    ),
    seed: int = typer.Option(0, help="Random seed."),
    data: Path | None = typer.Option(
        None, help="An ImageFolder or shards of `data pack` (default: synthetic)."
    ),
    workers: int | None = typer.Option(
        None, help="Loader workers (default 0 synthetic, 2).", min=0
    ),
    pin_memory: bool = typer.Option(False, help="Pin DataLoader memory."),
    *,
    launch: LaunchFlags,
) -> None:
    """Data-parallel training of a built-in torchvision model, profiled."""
    from scalescope.bench.options import BenchOptions
    from scalescope.commands import run as journey

    try:
        workload = BenchOptions(
            model=model, batch_size=batch_size, global_batch=global_batch, recipe=recipe,
            image_size=image_size, steps=steps,
            epochs=epochs, warmup_steps=warmup_steps, lr=lr, channels_last=channels_last,
            bf16=bf16, bucket_cap_mb=bucket_cap_mb, fsdp=fsdp, seed=seed, data=data,
            workers=workers, pin_memory=pin_memory,
        )  # fmt: skip
    except ValueError as exc:
        fail(str(exc))
        raise
    drive(journey.bench, journey.BenchCommand(
        workload=workload, nproc_per_node=nproc_per_node, launch=launch
    ))  # fmt: skip
