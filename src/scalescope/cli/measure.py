"""`suite`, `comm`, `scale`: measurements made of several runs or sizes."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import NPROC, PASSTHROUGH, app, drive
from scalescope.cli.launch_options import with_launch_options
from scalescope.cli.option_check import CheckedCommand
from scalescope.commands.run import LaunchFlags


@app.command(cls=CheckedCommand)
@with_launch_options("rendezvous", "placement", skip=("cpu_list",))
def suite(
    quick: bool = typer.Option(False, "--quick", help="Tiny sizes and few steps (CI smoke run)."),
    ranks: str = typer.Option("2", "--ranks", help="Rank counts to run each workload at: 1,2."),
    workloads: str | None = typer.Option(
        None,
        "--workloads",
        help="Comma list of resnet50, lstm, transformer, pca, kmeans, svm (default: all).",
    ),
    size: list[str] | None = typer.Option(
        None,
        "--size",
        help="WORKLOAD=N, repeatable: image size (resnet50), hidden size (lstm, transformer) "
        "or rows (pca, kmeans, svm), e.g. kmeans=2000000.",
    ),
    suite_dir: Path | None = typer.Option(
        None,
        "--run-dir",
        "--suite-dir",
        help="Where to record the suite's runs (default: scalescope_runs/suite-…); "
        "--suite-dir is its old name.",
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the table as JSON."),
    *,
    launch: LaunchFlags,
) -> None:
    """Run the benchmark suite (CNN, LSTM, transformer, PCA, K-Means, SVM) and tabulate it."""
    from scalescope.commands import suite as journey

    drive(journey.suite, journey.SuiteCommand(
        quick=quick, ranks=ranks, workloads=workloads, size=size, suite_dir=suite_dir,
        json_file=json_file, launch=launch,
    ))  # fmt: skip


@app.command(cls=CheckedCommand)
@with_launch_options("rendezvous", "nodes", "placement", "recording", skip=("no_probe",))
def comm(
    nproc_per_node: int | None = NPROC,
    ops: str = typer.Option(
        "allreduce",
        "--ops",
        help="Comma list: allreduce, allgather, reduce_scatter, broadcast, alltoall, sendrecv.",
    ),
    sizes: str = typer.Option(
        "8:64M", "--sizes", help="MIN:MAX bytes stepped by --factor (8:256M), or a list 8,1M."
    ),
    factor: int = typer.Option(2, "--factor", help="Size multiplier between MIN and MAX."),
    dtype: str = typer.Option("float32", "--dtype", help="float32, float64, float16, int32, ..."),
    backend: str = typer.Option(
        "gloo,nccl,mpi", "--backend", help="Comma list; one this build lacks is listed unavailable."
    ),
    iters: int = typer.Option(20, "--iters", help="Timed calls per size.", min=1),
    warmup: int = typer.Option(5, "--warmup", help="Untimed calls before them.", min=0),
    json_file: Path | None = typer.Option(None, "--json", help="Write results and α-β fits."),
    csv_file: Path | None = typer.Option(None, "--csv", help="Write the rows as CSV."),
    html: Path | None = typer.Option(None, "--html", help="Write latency and busbw plots."),
    nccl_tests: Path | None = typer.Option(
        None, "--nccl-tests", help="Only show an nccl-tests log in these columns; run nothing."
    ),
    probe: bool = typer.Option(
        False,
        "--probe",
        help="Also record every benchmarked call with the probe (report RUN_DIR shows them); "
        "it adds ~20 µs to each call of a 2-rank gloo all_reduce.",
    ),
    *,
    launch: LaunchFlags,
) -> None:
    """Collective micro-benchmark on torch.distributed: nccl-tests columns, OSU latency, α-β fit.

    Runs through the same launcher as run (local, Slurm, mpirun, multi-node); times the
    engine's own calls, untouched by the probe unless --probe.
    """
    from scalescope.commands import comm as journey

    drive(journey.comm, journey.CommCommand(
        nproc_per_node=nproc_per_node, ops=ops, sizes=sizes, factor=factor, dtype=dtype,
        backend=backend, iters=iters, warmup=warmup, json_file=json_file, csv_file=csv_file,
        html=html, nccl_tests=nccl_tests, probe=probe, launch=launch,
    ))  # fmt: skip


@app.command(cls=CheckedCommand, context_settings=PASSTHROUGH)
@with_launch_options("rendezvous", "nodes", "placement", skip=("nnodes",))
def scale(
    ctx: typer.Context,
    script: str | None = typer.Argument(None, help="Training script (or use --bench MODEL)."),
    ranks: str = typer.Option(..., "--ranks", help="Sizes to run, e.g. 1,2,4."),
    nodes: str | None = typer.Option(None, "--nodes", help="Nodes of each size, e.g. 1,1,2."),
    strong: bool = typer.Option(False, "--strong", help="Keep the global batch (default: weak)."),
    bench_model: str | None = typer.Option(None, "--bench", help="A built-in model instead."),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        min=1,
        help="Per-rank batch (global with --strong); a script gets it where its args say {batch}.",
    ),
    steps: int = typer.Option(20, help="Steps per size (--bench).", min=1),
    image_size: int = typer.Option(224, help="Image size (--bench).", min=8),
    warmup_steps: int = typer.Option(5, help="Steps left out of the statistics.", min=0),
    study_dir: Path | None = typer.Option(
        None,
        "--run-dir",
        "--study-dir",
        help="Where the study's runs go (default: scalescope_runs/scale-…); --study-dir is "
        "its old name.",
    ),
    html: Path | None = typer.Option(None, "--html", help="Write the scaling dashboard here."),
    *,
    launch: LaunchFlags,
) -> None:
    """Run the same workload at each size, one profiled run each, and print the scaling table.

    scalescope scale --ranks 1,2,4 --bench resnet50, or --ranks 1,2 --batch-size 32 -- train.py
    --batch {batch} (weak: {batch} is the per-rank batch; --strong: the global one / ranks).
    """
    from scalescope.commands import scale as journey

    drive(journey.scale, journey.ScaleCommand(
        script=script, args=tuple(ctx.args), bench_model=bench_model, ranks=ranks, nodes=nodes,
        strong=strong, batch_size=batch_size, steps=steps, image_size=image_size,
        warmup_steps=warmup_steps, study_dir=study_dir, html=html, launch=launch,
    ))  # fmt: skip
