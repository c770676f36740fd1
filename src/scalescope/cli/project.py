"""`project`: the performance model to more nodes or other hardware."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import app, drive


@app.command()
def project(
    run_dir: Path | None = typer.Argument(
        None,
        help="A run directory written by run or bench, or a scale study (its largest size); "
        "or give --validate.",
    ),
    nodes: str = typer.Option("1,2,4,8", "--nodes", help="Node counts to project, e.g. 1,2,4,8."),
    ranks_per_node: int | None = typer.Option(
        None, "--ranks-per-node", help="Ranks per node (default: the run's, or per GPU/NUMA)."
    ),
    hardware: str | None = typer.Option(
        None,
        "--hardware",
        help="Target: a64fx, xeon-8380, epyc-7763, v100, a100, h100, h200 or FILE.toml "
        "(default: the machine of the run).",
    ),
    comm: Path | None = typer.Option(
        None,
        "--comm",
        help="α-β fits for the allreduce: `scalescope comm --json` file or comm run directory.",
    ),
    global_batch: int | None = typer.Option(
        None, "--global-batch", help="Strong scaling: this global batch at every size."
    ),
    per_rank_batch: int | None = typer.Option(
        None, "--per-rank-batch", help="Weak scaling with this batch per rank (default: run's)."
    ),
    algorithm: str = typer.Option("ring", "--algorithm", help="Allreduce: ring or tree."),
    epoch_samples: int = typer.Option(
        1_281_167, "--epoch-samples", help="Samples per epoch (ImageNet-1k's training set)."
    ),
    efficiency: float | None = typer.Option(
        None, "--efficiency", help="With --hardware: fraction of its roofline (default: as here)."
    ),
    validate: Path | None = typer.Option(
        None, "--validate", help="A scale study: fit on the smaller sizes, predict the largest."
    ),
    holdout: int = typer.Option(1, "--holdout", help="Largest sizes held out by --validate."),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the result as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Also write the projection as HTML."),
) -> None:
    """Project step time, throughput and epoch time to more nodes or other hardware.

    Also kept in RUN_DIR/projection.json for the run's dashboard (report RUN_DIR --html).
    """
    from scalescope.commands import project as journey

    drive(journey.project, journey.ProjectCommand(
        run_dir=run_dir, nodes=nodes, ranks_per_node=ranks_per_node, hardware=hardware,
        comm=comm, global_batch=global_batch, per_rank_batch=per_rank_batch,
        algorithm=algorithm, epoch_samples=epoch_samples, efficiency=efficiency,
        validate=validate, holdout=holdout, json_file=json_file, html=html,
    ))  # fmt: skip
