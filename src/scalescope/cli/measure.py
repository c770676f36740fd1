"""`suite`, `comm`, `scale`: measurements made of several runs or sizes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scalescope.cli.common import (
    NPROC,
    PASSTHROUGH,
    app,
    err,
    fail,
    int_list,
    launch_spec,
    mapping_options,
    start_or_plan,
    time_stamp,
)
from scalescope.cli.launch_options import with_launch_options
from scalescope.cli.option_check import CheckedCommand
from scalescope.report.eta import Eta

if TYPE_CHECKING:
    from scalescope.launch.runner import RunSpec


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
    launch: dict[str, Any],
) -> None:
    """Run the benchmark suite (CNN, LSTM, transformer, PCA, K-Means, SVM) and tabulate it."""
    from scalescope.bench.suite_workloads import parse_ranks, parse_sizes, select_workloads
    from scalescope.commands.suite import SuitePlan, default_suite_dir, run_suite
    from scalescope.events.files import SUITE_FILE
    from scalescope.launch.local import LaunchOptions
    from scalescope.report.suite_view import render_suite, suite_console, write_suite_json

    params = locals() | launch
    try:
        plan = SuitePlan(
            workloads=select_workloads(workloads), ranks=parse_ranks(ranks), quick=quick,
            sizes=parse_sizes(size or []), suite_dir=suite_dir or default_suite_dir(),
            launch=LaunchOptions(
                master_addr=launch["master_addr"] or "127.0.0.1", master_port=launch["master_port"]
            ),
            mapping=mapping_options(params), command=("scalescope", *sys.argv[1:]),
        )  # fmt: skip
        eta = Eta(len(plan.workloads) * len(plan.ranks), "suite")
        result = run_suite(plan, lambda what: err.print(eta.line(what)))
    except ValueError as exc:
        fail(str(exc))
    render_suite(result, suite_console())
    for path in write_suite_json(result, plan.suite_dir / SUITE_FILE, json_file):
        err.print(f"wrote {path}")
    failed = [e for e in result.entries if e.status != "completed" or e.error]
    raise typer.Exit(130 if result.interrupted else (1 if failed else 0))


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
    launch: dict[str, Any],
) -> None:
    """Collective micro-benchmark on torch.distributed: nccl-tests columns, OSU latency, α-β fit.

    Runs through the same launcher as run (local, Slurm, mpirun, multi-node); times the
    engine's own calls, untouched by the probe unless --probe.
    """
    from scalescope.bench.comm_options import CommOptions
    from scalescope.commands.comm import CommFiles, run_comm, show_nccl_tests, write_comm
    from scalescope.ingest import IngestError
    from scalescope.report.formatting import report_console

    if nccl_tests is not None:
        try:
            show_nccl_tests(nccl_tests, report_console())
        except IngestError as exc:
            fail(str(exc))
        raise typer.Exit(0)

    # its --html is not a dashboard
    params = locals() | launch | {"no_report": True, "html": None, "no_probe": not probe}
    try:
        options = CommOptions.parse(ops, sizes, factor, dtype, backend, iters, warmup)
    except ValueError as exc:
        fail(str(exc))
    runnable, unavailable = options.split_backends()
    if not runnable:
        reasons = "; ".join(f"{b}: {why}" for b, why in unavailable.items())
        fail(f"no backend can run here ({reasons})")
    spec = launch_spec(
        params, target="scalescope.bench.comm", is_module=True,
        args=options.workload_args(runnable), warmup_steps=0, workload="comm",
        options=options.as_dict() | {"unavailable": unavailable},
    )  # fmt: skip
    if launch["dry_run"]:
        start_or_plan(spec, params)
    try:
        given = nproc_per_node is not None
        outcome, bench = run_comm(spec, given, launch["master_addr"], unavailable)
    except ValueError as exc:
        fail(str(exc))
    if bench is None:
        raise typer.Exit(outcome.exit_code)
    files = CommFiles(json=json_file, csv=csv_file, html=html)
    for path in write_comm(bench, outcome.run_dir, files, report_console()):
        err.print(f"wrote {path}")
    err.print(f"run {outcome.status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    raise typer.Exit(outcome.exit_code)


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
    launch: dict[str, Any],
) -> None:
    """Run the same workload at each size, one profiled run each, and print the scaling table.

    scalescope scale --ranks 1,2,4 --bench resnet50, or --ranks 1,2 --batch-size 32 -- train.py
    --batch {batch} (weak: {batch} is the per-rank batch; --strong: the global one / ranks).
    """
    from scalescope.commands.scale import ScalePlan, report_study, run_study
    from scalescope.events.files import SCALE_STUDY_FILE
    from scalescope.launch.session import start
    from scalescope.report.formatting import report_console

    sizes = int_list(ranks, "--ranks") or ()
    params = locals() | launch | {"nproc_per_node": 1}
    if (script is None) == (bench_model is None):
        fail("give a training script or --bench MODEL (one of them)")
    try:
        plan = ScalePlan(
            ranks=sizes, nodes=int_list(nodes, "--nodes") or (1,) * len(sizes), strong=strong,
            batch_size=batch_size if script or batch_size else 32,
            batch_arg="--batch-size" if bench_model else None,
        )  # fmt: skip
    except ValueError as exc:
        fail(str(exc))
    name = bench_model or Path(script or "").stem
    where = study_dir or Path("scalescope_runs") / f"scale-{name}-{time_stamp()}"
    if (where / SCALE_STUDY_FILE).exists():
        fail(f"{str(where)} already holds a study; choose another --run-dir")
    params["nnodes"] = max(plan.nodes)  # the base run's node count; each size sets its own
    spec = scale_spec(params, script, bench_model, list(ctx.args), steps, image_size)
    eta = Eta(len(plan.ranks), "scale")

    def start_size(size_spec: RunSpec) -> object:
        ranks = size_spec.launch.world_size
        err.print(eta.line(f"{ranks} rank{'s' if ranks > 1 else ''}"))
        return start(size_spec, True, launch["master_addr"])

    study = run_study(spec, plan, where, start_size, scale_progress)
    for path in report_study(where, html, report_console()):
        err.print(f"wrote {path}")
    err.print(f"study: {where / SCALE_STUDY_FILE}  (scalescope report {where})")
    raise typer.Exit(0 if all(p.status == "ok" for p in study.points) else 1)


def scale_spec(
    p: dict[str, Any], script: str | None, model: str | None, args: list[str], steps: int,
    image_size: int,
) -> RunSpec:  # fmt: skip
    """The run of one size before its ranks and batch are set."""
    from scalescope.commands.scale import BATCH_PLACEHOLDER

    if model is None:
        if p["batch_size"] is not None and not any(BATCH_PLACEHOLDER in a for a in args):
            fail("--batch-size with a script needs {batch} in the script's arguments")
        return launch_spec(p, target=script, args=args, warmup_steps=p["warmup_steps"])
    from scalescope.bench.options import BenchOptions

    if p["warmup_steps"] >= steps:
        fail(f"--warmup-steps ({p['warmup_steps']}) must be less than --steps ({steps})")

    try:
        options = BenchOptions(
            model=model, steps=steps, image_size=image_size, warmup_steps=p["warmup_steps"]
        )
    except ValueError as exc:
        fail(str(exc))
    return launch_spec(
        p, target="scalescope.bench.workload", is_module=True,
        args=[*options.workload_args(), *args], warmup_steps=p["warmup_steps"], workload=model,
        options=options.as_dict(),
    )  # fmt: skip


def scale_progress(point: Any) -> None:
    figures = f"{point.samples_per_s:,.1f} samples/s" if point.samples_per_s else point.error
    err.print(f"{point.ranks} ranks: {point.status}, {figures}")
