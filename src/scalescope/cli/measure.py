"""`suite`, `comm`, `scale`: measurements made of several runs or sizes."""

from __future__ import annotations

from scalescope.cli.common import PASSTHROUGH, app, drive, needs_run_extra
from scalescope.cli.option_check import CheckedCommand
from scalescope.cli.params import options_command
from scalescope.commands.options.launching import CommCommand, ScaleCommand, SuiteCommand


@app.command(cls=CheckedCommand)
@options_command(SuiteCommand)
def suite(options: SuiteCommand) -> None:
    """Run the benchmark suite (CNN, LSTM, transformer, PCA, K-Means, SVM) and tabulate it."""
    needs_run_extra("suite")
    from scalescope.commands import suite as journey

    drive(journey.suite, options)


@app.command(cls=CheckedCommand)
@options_command(CommCommand)
def comm(options: CommCommand) -> None:
    """Collective micro-benchmark on torch.distributed: nccl-tests columns, OSU latency, α-β fit.

    Runs through the same launcher as run (local, Slurm, mpirun, multi-node); times the
    engine's own calls, untouched by the probe unless --probe.
    """
    needs_run_extra("comm")
    from scalescope.commands import comm as journey

    drive(journey.comm, options)


@app.command(cls=CheckedCommand, context_settings=PASSTHROUGH)
@options_command(ScaleCommand)
def scale(options: ScaleCommand) -> None:
    """Run the same workload at each size, one profiled run each, and print the scaling table.

    scalescope scale --ranks 1,2,4 --bench resnet50, or --ranks 1,2 --batch-size 32 -- train.py
    --batch {batch} (weak: {batch} is the per-rank batch; --strong: the global one / ranks).
    """
    needs_run_extra("scale")
    from scalescope.commands import scale as journey

    drive(journey.scale, options)
