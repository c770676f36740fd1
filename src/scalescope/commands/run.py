"""`scalescope run` and `bench`: the ranks started under the probe through the shared launch
journey (api/launching.py), or their plan printed (--dry-run), the report printed at the end."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scalescope.api.launching import launch_spec, start_or_plan
from scalescope.commands.common import CommandError, err, launch_error
from scalescope.commands.options.launching import BenchCommand, RunCommand

if TYPE_CHECKING:
    from scalescope.bench.options import BenchOptions


def run(command: RunCommand) -> int:
    """Start the script's ranks (or print their plan); the run's exit code."""
    if command.script.startswith("-"):
        raise CommandError(f"No such option: {command.script} (see scalescope run --help)")
    try:
        spec = launch_spec(
            command.launch, command.nproc_per_node, target=command.script,
            is_module=command.module, args=list(command.args),
            warmup_steps=command.warmup_steps,
        )  # fmt: skip
        return start_or_plan(spec, command.launch, command.nproc_per_node, err)
    except ValueError as exc:
        raise launch_error(exc) from None


def bench(command: BenchCommand) -> int:
    """Start the built-in workload's ranks (or print their plan); the run's exit code."""
    nproc = command.nproc_per_node
    try:
        options = workload(command)
        if nproc is not None:
            options.check_world(nproc * command.launch.rendezvous.nnodes)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    try:
        spec = launch_spec(
            command.launch, nproc, target="scalescope.bench.workload", is_module=True,
            args=options.workload_args(), warmup_steps=options.warmup_steps,
            workload=options.model, options=options.as_dict(),
        )  # fmt: skip
        return start_or_plan(spec, command.launch, nproc, err)
    except ValueError as exc:
        raise launch_error(exc) from None


def workload(command: BenchCommand) -> BenchOptions:
    """The built-in workload's options (its model, batch, data and steps), checked."""
    from scalescope.bench.options import BenchOptions

    c = command
    return BenchOptions(
        model=c.model, batch_size=c.batch_size, global_batch=c.global_batch, recipe=c.recipe,
        image_size=c.image_size, steps=c.steps, epochs=c.epochs, warmup_steps=c.warmup_steps,
        lr=c.lr, channels_last=c.channels_last, bf16=c.bf16, bucket_cap_mb=c.bucket_cap_mb,
        fsdp=c.fsdp, seed=c.seed, data=c.data, workers=c.workers, pin_memory=c.pin_memory,
    )  # fmt: skip
