"""Command line: parses, calls one stage entry point, renders. No logic of its own."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

from scalescope.launch.local import LaunchOptions
from scalescope.launch.plan import MappingOptions
from scalescope.launch.runner import RunSpec
from scalescope.launch.session import Outcome

if TYPE_CHECKING:
    from scalescope.diagnose.thresholds import Thresholds

app = typer.Typer(
    help="Launch, profile and report on distributed PyTorch training.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
"""Markup off: paths, script arguments and error messages may hold ``[`` ``]``; they print
verbatim."""

PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}

NPROC = typer.Option(
    None, "--nproc-per-node", "-n", help="Ranks to start on this node [default: 1].", min=1
)
MASTER_ADDR = typer.Option(
    None,
    "--master-addr",
    help="Address of rank 0 (default: 127.0.0.1; under srun/mpirun found from the launcher).",
)
MASTER_PORT = typer.Option(
    None,
    "--master-port",
    help="Port of the rendezvous (default: free; under srun/mpirun derived from the job id).",
)
RUN_DIR = typer.Option(None, "--run-dir", help="Where to record (default: scalescope_runs/…).")
NO_PROBE = typer.Option(False, "--no-probe", help="Run without instrumentation (for A/B).")
NO_REPORT = typer.Option(False, "--no-report", help="Do not print the report at the end.")
HTML = typer.Option(None, "--html", help="Also write the HTML dashboard of the run here.")
NNODES = typer.Option(1, "--nnodes", help="Nodes in the job (torchrun-style).", min=1)
NODE_RANK = typer.Option(0, "--node-rank", help="This node's index.", min=0)
RDZV_ENDPOINT = typer.Option(None, "--rdzv-endpoint", help="HOST[:PORT] of the rendezvous.")
RDZV_BACKEND = typer.Option("c10d", "--rdzv-backend", help="c10d or static.")
RDZV_ID = typer.Option("", "--rdzv-id", help="Job id shared by all nodes.")
LOCAL_ADDR = typer.Option(None, "--local-addr", help="This node's address for the others.")
MAP_BY = typer.Option(
    "numa", "--map-by", help="Domains to spread ranks over: node, socket, numa, core."
)
THREADS = typer.Option(
    None, "--threads-per-rank", help="Threads per rank (default: its cores).", min=1
)
NUMA_NODES = typer.Option(None, "--numa-nodes", help="Use only these NUMA nodes, e.g. 0,1.")
CPU_LIST = typer.Option(None, "--cpu-list", help="Cpus of one rank (repeat per rank), e.g. 0-11.")
OVERSUBSCRIBE = typer.Option(False, "--oversubscribe", help="Allow more threads than cores.")
NO_BIND = typer.Option(False, "--no-bind", help="Do not bind ranks to cpus.")
BIND_TO = typer.Option(
    "domain", "--bind-to", help="domain: the rank's NUMA node/socket; core: its own cores."
)
ALLOCATOR = typer.Option("default", "--allocator", help="tcmalloc, jemalloc or default.")
DRY_RUN = typer.Option(False, "--dry-run", help="Print the placement plan and start nothing.")
REPORT_BINDINGS = typer.Option(False, "--report-bindings", help="Each rank prints its binding.")
THRESHOLD = typer.Option(
    None,
    "--threshold",
    "-t",
    help="Set a diagnosis threshold, NAME=VALUE (repeat), e.g. data_share_pct=20; "
    "names in docs/diagnosis.md.",
)
BASELINE = typer.Option(
    None,
    "--baseline",
    help="A good bench run on this machine: its FLOP/s become the expected ones.",
)


def diagnosis_thresholds(items: list[str] | None, baseline: Path | None) -> Thresholds:
    """The thresholds from --threshold and --baseline (a bad one fails with its reason)."""
    from scalescope.diagnose.calibrate import calibrate, parse_overrides
    from scalescope.events.run import RunDirError

    try:
        thresholds = parse_overrides(items or [])
        if baseline is None:
            return thresholds
        calibration = calibrate(baseline, thresholds)
    except (ValueError, RunDirError) as exc:
        fail(str(exc))
        raise
    err.print(calibration.note)
    return calibration.thresholds


def plain_console() -> Console:
    """Standard output with markup off, so recorded strings print verbatim."""
    return Console(highlight=False, markup=False)


def fail(message: str, code: int = 2) -> None:
    err.print(Text.assemble(("error:", "bold red"), " ", message))
    raise typer.Exit(code)


def finish(outcome: Outcome, show_report: bool, probe: bool, html: Path | None) -> None:
    if probe and outcome.report_here and (show_report or html):
        from scalescope.report.outputs import ReportFiles, report_run

        for path in report_run(outcome.run_dir, ReportFiles(html=html), terminal=show_report):
            err.print(f"wrote {path}")
    if outcome.report_here:
        err.print(f"run {outcome.status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    raise typer.Exit(outcome.exit_code)


def launch_options(p: dict[str, Any]) -> LaunchOptions:
    return LaunchOptions(
        nproc_per_node=p["nproc_per_node"] or 1,
        master_addr=p["master_addr"] or "127.0.0.1",
        master_port=p["master_port"],
        nnodes=p["nnodes"],
        node_rank=p["node_rank"],
        rdzv_endpoint=p["rdzv_endpoint"],
        rdzv_backend=p["rdzv_backend"],
        rdzv_id=p["rdzv_id"],
        local_addr=p["local_addr"],
    )


def mapping_options(p: dict[str, Any]) -> MappingOptions:
    numa = p["numa_nodes"]
    try:
        numa_nodes = tuple(int(n) for n in numa.split(",")) if numa else None
    except ValueError as exc:
        raise ValueError(f"--numa-nodes takes numbers like 0,1, got {numa!r}") from exc
    return MappingOptions(
        bind=not p["no_bind"],
        bind_to=p["bind_to"],
        map_by=p["map_by"],
        threads_per_rank=p["threads_per_rank"],
        numa_nodes=numa_nodes,
        cpu_lists=tuple(p["cpu_list"]) if p["cpu_list"] else None,
        oversubscribe=p["oversubscribe"],
        allocator=p["allocator"],
    )


def launch_spec(p: dict[str, Any], **spec: Any) -> RunSpec:
    """A RunSpec from the shared launch options of run and bench; bad values exit with 2."""
    try:
        return RunSpec(
            launch=launch_options(p),
            mapping=mapping_options(p),
            run_dir=p["run_dir"],
            probe=not p["no_probe"],
            report_bindings=p["report_bindings"],
            command=["scalescope", *sys.argv[1:]],
            **spec,
        )
    except ValueError as exc:
        fail(str(exc))
        raise


def start_or_plan(spec: RunSpec, p: dict[str, Any]) -> None:
    from scalescope.launch.session import dry_run, start

    given = p["nproc_per_node"] is not None
    try:
        if p["dry_run"]:
            from scalescope.report.plan_view import render_plan

            render_plan(dry_run(spec, given, p["master_addr"]), plain_console())
            raise typer.Exit(0)
        outcome = start(spec, given, p["master_addr"])
    except ValueError as exc:
        fail(str(exc))
    finish(outcome, not p["no_report"], spec.probe, p["html"])


@app.command(context_settings=PASSTHROUGH)
def run(
    ctx: typer.Context,
    script: str = typer.Argument(..., help="Training script (or module with -m)."),
    nproc_per_node: int | None = NPROC,
    module: bool = typer.Option(False, "--module", "-m", help="SCRIPT is a module name."),
    warmup_steps: int = typer.Option(1, help="Steps left out of the statistics.", min=0),
    master_addr: str | None = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    nnodes: int = NNODES,
    node_rank: int = NODE_RANK,
    rdzv_endpoint: str | None = RDZV_ENDPOINT,
    rdzv_backend: str = RDZV_BACKEND,
    rdzv_id: str = RDZV_ID,
    local_addr: str | None = LOCAL_ADDR,
    map_by: str = MAP_BY,
    threads_per_rank: int | None = THREADS,
    numa_nodes: str | None = NUMA_NODES,
    cpu_list: list[str] | None = CPU_LIST,
    oversubscribe: bool = OVERSUBSCRIBE,
    no_bind: bool = NO_BIND,
    bind_to: str = BIND_TO,
    allocator: str = ALLOCATOR,
    dry_run: bool = DRY_RUN,
    report_bindings: bool = REPORT_BINDINGS,
    run_dir: Path | None = RUN_DIR,
    no_probe: bool = NO_PROBE,
    no_report: bool = NO_REPORT,
    html: Path | None = HTML,
) -> None:
    """Start ranks of SCRIPT [ARGS] under the probe and record a run directory.

    Arguments after SCRIPT go to the script: scalescope run -n 2 train.py --epochs 1.
    Under srun, mpirun or torchrun, without -n, each task joins the launcher's world as one rank.
    """
    if script.startswith("-"):
        fail(f"No such option: {script} (see scalescope run --help)")
    params = locals()
    spec = launch_spec(
        params, target=script, is_module=module, args=list(ctx.args), warmup_steps=warmup_steps
    )
    start_or_plan(spec, params)


@app.command()
def report(
    run_dir: Path = typer.Argument(
        ..., help="A run directory written by run or bench, or a study directory of scale."
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the report as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Also write the HTML dashboard."),
    timeline: Path | None = typer.Option(
        None, "--timeline", help="Also write a Chrome/Perfetto trace of a few steps."
    ),
    steps: int | None = typer.Option(
        None, "--steps", help="Steps in the timelines (default: 10 after warm-up).", min=1
    ),
    threshold: list[str] | None = THRESHOLD,
    baseline: Path | None = BASELINE,
) -> None:
    """Print where the time went in a recorded run; optionally write JSON, HTML, timeline."""
    from scalescope.events.run import RunDirError
    from scalescope.events.study import STUDY_FILE
    from scalescope.report.outputs import ReportFiles, report_console, report_run

    if (run_dir / STUDY_FILE).is_file():
        from scalescope.bench.scale import report_study

        if json_file or timeline:
            fail(f"{run_dir} is a scale study: its JSON is {STUDY_FILE}; no timeline")
        try:
            written = report_study(run_dir, html, report_console())
        except ValueError as exc:
            fail(str(exc))
        for path in written:
            err.print(f"wrote {path}")
        return
    files = ReportFiles(json=json_file, html=html, timeline=timeline, steps=steps)
    thresholds = diagnosis_thresholds(threshold, baseline)
    try:
        written = report_run(run_dir, files, thresholds=thresholds)
    except RunDirError as exc:
        fail(str(exc))
    for path in written:
        err.print(f"wrote {path}")


@app.command()
def analyze(
    path: Path = typer.Argument(
        ..., help="A torch.profiler trace (file or per-rank directory) or a Horovod timeline."
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the report as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Also write the HTML dashboard."),
    timeline: Path | None = typer.Option(None, "--timeline", help="Also write a Chrome trace."),
    steps: int | None = typer.Option(None, "--steps", help="Steps in the timelines.", min=1),
    threshold: list[str] | None = THRESHOLD,
    baseline: Path | None = BASELINE,
) -> None:
    """The same report for traces from other tools (torch.profiler/Kineto, Horovod)."""
    from scalescope.ingest import IngestError
    from scalescope.report.outputs import ReportFiles, analyze_trace

    files = ReportFiles(json=json_file, html=html, timeline=timeline, steps=steps)
    thresholds = diagnosis_thresholds(threshold, baseline)
    try:
        written = analyze_trace(path, files, thresholds)
    except IngestError as exc:
        fail(str(exc))
    for out in written:
        err.print(f"wrote {out}")


@app.command()
def compare(
    run_a: Path = typer.Argument(..., help="The baseline run directory."),
    run_b: Path = typer.Argument(..., help="The run to compare with it."),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the comparison."),
    html: Path | None = typer.Option(None, "--html", help="Also write a side-by-side dashboard."),
) -> None:
    """The same tables for two runs side by side, with ratios B / A."""
    from scalescope.events.run import RunDirError
    from scalescope.report.outputs import compare_run_dirs

    try:
        compare_run_dirs(run_a, run_b, json_file, html)
    except RunDirError as exc:
        fail(str(exc))


@app.command()
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
    seed: int = typer.Option(0, help="Random seed."),
    data: Path | None = typer.Option(
        None, help="An ImageFolder or shards of `data pack` (default: synthetic)."
    ),
    workers: int | None = typer.Option(
        None, help="Loader workers (default 0 synthetic, 2).", min=0
    ),
    pin_memory: bool = typer.Option(False, help="Pin DataLoader memory."),
    master_addr: str | None = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    nnodes: int = NNODES,
    node_rank: int = NODE_RANK,
    rdzv_endpoint: str | None = RDZV_ENDPOINT,
    rdzv_backend: str = RDZV_BACKEND,
    rdzv_id: str = RDZV_ID,
    local_addr: str | None = LOCAL_ADDR,
    map_by: str = MAP_BY,
    threads_per_rank: int | None = THREADS,
    numa_nodes: str | None = NUMA_NODES,
    cpu_list: list[str] | None = CPU_LIST,
    oversubscribe: bool = OVERSUBSCRIBE,
    no_bind: bool = NO_BIND,
    bind_to: str = BIND_TO,
    allocator: str = ALLOCATOR,
    dry_run: bool = DRY_RUN,
    report_bindings: bool = REPORT_BINDINGS,
    run_dir: Path | None = RUN_DIR,
    no_probe: bool = NO_PROBE,
    no_report: bool = NO_REPORT,
    html: Path | None = HTML,
) -> None:
    """Data-parallel training of a built-in torchvision model, profiled."""
    from scalescope.bench.options import BenchOptions

    params = locals()
    try:
        options = BenchOptions(
            model=model, batch_size=batch_size, global_batch=global_batch, recipe=recipe,
            image_size=image_size, steps=steps,
            epochs=epochs, warmup_steps=warmup_steps, lr=lr, channels_last=channels_last,
            bf16=bf16, bucket_cap_mb=bucket_cap_mb, seed=seed, data=data, workers=workers,
            pin_memory=pin_memory,
        )  # fmt: skip
        if nproc_per_node is not None:
            options.check_world(nproc_per_node * nnodes)
    except ValueError as exc:
        fail(str(exc))
    spec = launch_spec(
        params,
        target="scalescope.bench.workload",
        is_module=True,
        args=options.workload_args(),
        warmup_steps=warmup_steps,
        workload=model,
        options=options.as_dict(),
    )
    start_or_plan(spec, params)


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
    from scalescope.bench.pack import pack_folder
    from scalescope.bench.shards import parse_size
    from scalescope.report.data_view import byte_progress, render_pack

    try:
        shard_bytes = parse_size(shard_size)
        with byte_progress(err, f"packing {folder}") as advance:
            manifest = pack_folder(folder, out, shard_bytes, seed, advance)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    render_pack(manifest, str(out), err)


@data_app.command("stage")
def data_stage(
    shards: Path = typer.Argument(..., help="A shard directory written by `data pack`."),
    dest: Path = typer.Argument(..., help="Node-local directory, e.g. /dev/shm/train."),
    timeout: float = typer.Option(3600.0, help="Seconds the other ranks wait for the copy."),
) -> None:
    """Copy shards to node-local disk or RAM, once per node under Slurm, mpirun or torchrun."""
    from scalescope.bench.stage import stage_shards
    from scalescope.report.data_view import byte_progress, render_stage

    try:
        with byte_progress(err, f"staging to {dest}") as advance:
            result = stage_shards(shards, dest, timeout_s=timeout, progress=advance)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    render_stage(result, str(shards), err)


@data_app.command("bench")
def data_bench(
    paths: list[Path] = typer.Argument(..., help="Image folders and/or shard directories."),
    workers: str = typer.Option("0,2", help="Loader worker counts to try, e.g. 0,2,4."),
    images: int = typer.Option(512, help="Images timed per run.", min=1),
    batch_size: int = typer.Option(32, help="Images per batch.", min=1),
    image_size: int = typer.Option(224, help="Crop size of the training transforms.", min=8),
    rounds: int = typer.Option(3, help="Interleaved rounds; the median is reported.", min=1),
) -> None:
    """Images/s of folders vs shards through the bench's decode + training transforms."""
    from scalescope.bench.data_speed import measure, one_line, parse_workers, ratios
    from scalescope.report.data_view import render_speed, run_progress

    try:
        counts = parse_workers(workers)
        with run_progress(err, "timing loaders", rounds * len(paths) * len(counts)) as done:
            speeds = measure(paths, counts, images=images, batch_size=batch_size,
                             image_size=image_size, rounds=rounds, on_run=done)  # fmt: skip
    except (ValueError, OSError) as exc:
        fail(one_line(exc))
    render_speed(speeds, ratios(speeds), plain_console())


@app.command()
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
        None, "--suite-dir", help="Where to record the runs (default: scalescope_runs/suite-…)."
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the table as JSON."),
    master_addr: str | None = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    map_by: str = MAP_BY,
    threads_per_rank: int | None = THREADS,
    numa_nodes: str | None = NUMA_NODES,
    oversubscribe: bool = OVERSUBSCRIBE,
    no_bind: bool = NO_BIND,
    bind_to: str = BIND_TO,
    allocator: str = ALLOCATOR,
) -> None:
    """Run the benchmark suite (CNN, LSTM, transformer, PCA, K-Means, SVM) and tabulate it."""
    from scalescope.bench.suite import SUITE_FILE, SuitePlan, default_suite_dir, run_suite
    from scalescope.bench.suite_workloads import parse_ranks, parse_sizes, select_workloads
    from scalescope.report.suite_view import render_suite, suite_console, write_suite_json

    params = {**locals(), "cpu_list": None}
    try:
        plan = SuitePlan(
            workloads=select_workloads(workloads), ranks=parse_ranks(ranks), quick=quick,
            sizes=parse_sizes(size or []), suite_dir=suite_dir or default_suite_dir(),
            launch=LaunchOptions(master_addr=master_addr or "127.0.0.1", master_port=master_port),
            mapping=mapping_options(params), command=("scalescope", *sys.argv[1:]),
        )  # fmt: skip
        total = len(plan.workloads) * len(plan.ranks)
        count = iter(range(1, total + 1))
        result = run_suite(plan, lambda what: err.print(f"suite [{next(count)}/{total}] {what}"))
    except ValueError as exc:
        fail(str(exc))
    render_suite(result, suite_console())
    for path in write_suite_json(result, plan.suite_dir / SUITE_FILE, json_file):
        err.print(f"wrote {path}")
    failed = [e for e in result.entries if e.status != "completed" or e.error]
    raise typer.Exit(130 if result.interrupted else (1 if failed else 0))


@app.command()
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
    master_addr: str | None = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    nnodes: int = NNODES,
    node_rank: int = NODE_RANK,
    rdzv_endpoint: str | None = RDZV_ENDPOINT,
    rdzv_backend: str = RDZV_BACKEND,
    rdzv_id: str = RDZV_ID,
    local_addr: str | None = LOCAL_ADDR,
    map_by: str = MAP_BY,
    threads_per_rank: int | None = THREADS,
    numa_nodes: str | None = NUMA_NODES,
    cpu_list: list[str] | None = CPU_LIST,
    oversubscribe: bool = OVERSUBSCRIBE,
    no_bind: bool = NO_BIND,
    bind_to: str = BIND_TO,
    allocator: str = ALLOCATOR,
    dry_run: bool = DRY_RUN,
    report_bindings: bool = REPORT_BINDINGS,
    run_dir: Path | None = RUN_DIR,
    no_probe: bool = NO_PROBE,
) -> None:
    """Collective micro-benchmark on torch.distributed: nccl-tests columns, OSU latency, α-β fit.

    Runs through the same launcher as run (local, Slurm, mpirun, multi-node), probe on.
    """
    from scalescope.bench.comm_options import CommOptions
    from scalescope.bench.comm_run import CommFiles, run_comm, show_nccl_tests, write_comm
    from scalescope.ingest import IngestError
    from scalescope.report.outputs import report_console

    if nccl_tests is not None:
        try:
            show_nccl_tests(nccl_tests, report_console())
        except IngestError as exc:
            fail(str(exc))
        raise typer.Exit(0)

    params = locals() | {"no_report": True, "html": None}
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
    if dry_run:
        start_or_plan(spec, params)
    try:
        outcome, bench = run_comm(spec, nproc_per_node is not None, master_addr, unavailable)
    except ValueError as exc:
        fail(str(exc))
    if bench is None:
        raise typer.Exit(outcome.exit_code)
    files = CommFiles(json=json_file, csv=csv_file, html=html)
    for path in write_comm(bench, outcome.run_dir, files, report_console()):
        err.print(f"wrote {path}")
    err.print(f"run {outcome.status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    raise typer.Exit(outcome.exit_code)


def int_list(text: str | None, flag: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        fail(f"{flag} takes numbers like 1,2,4, got {text!r}")
        raise


@app.command(context_settings=PASSTHROUGH)
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
    study_dir: Path | None = typer.Option(None, "--study-dir", help="Where the runs go."),
    html: Path | None = typer.Option(None, "--html", help="Write the scaling dashboard here."),
    master_addr: str | None = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    node_rank: int = NODE_RANK,
    rdzv_endpoint: str | None = RDZV_ENDPOINT,
    rdzv_backend: str = RDZV_BACKEND,
    rdzv_id: str = RDZV_ID,
    local_addr: str | None = LOCAL_ADDR,
    map_by: str = MAP_BY,
    threads_per_rank: int | None = THREADS,
    numa_nodes: str | None = NUMA_NODES,
    cpu_list: list[str] | None = CPU_LIST,
    oversubscribe: bool = OVERSUBSCRIBE,
    no_bind: bool = NO_BIND,
    bind_to: str = BIND_TO,
    allocator: str = ALLOCATOR,
) -> None:
    """Run the same workload at each size, one profiled run each, and print the scaling table.

    scalescope scale --ranks 1,2,4 --bench resnet50, or --ranks 1,2 --batch-size 32 -- train.py
    --batch {batch} (weak: {batch} is the per-rank batch; --strong: the global one / ranks).
    """
    from scalescope.bench.scale import ScalePlan, report_study, run_study
    from scalescope.events.study import STUDY_FILE
    from scalescope.launch.session import start
    from scalescope.report.outputs import report_console

    sizes = int_list(ranks, "--ranks") or ()
    params = locals() | {"nproc_per_node": 1, "nnodes": 1, "run_dir": None, "no_probe": False,
                         "report_bindings": False}  # fmt: skip
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
    if (where / STUDY_FILE).exists():
        fail(f"{str(where)} already holds a study; choose another --study-dir")
    spec = scale_spec(params, script, bench_model, list(ctx.args), steps, image_size)
    study = run_study(spec, plan, where, lambda s: start(s, True, master_addr), scale_progress)
    for path in report_study(where, html, report_console()):
        err.print(f"wrote {path}")
    err.print(f"study: {where / STUDY_FILE}  (scalescope report {where})")
    raise typer.Exit(0 if all(p.status == "ok" for p in study.points) else 1)


def scale_spec(
    p: dict[str, Any], script: str | None, model: str | None, args: list[str], steps: int,
    image_size: int,
) -> RunSpec:  # fmt: skip
    """The run of one size before its ranks and batch are set."""
    from scalescope.bench.scale import BATCH_PLACEHOLDER

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


def time_stamp() -> str:
    import time

    return time.strftime("%Y%m%d-%H%M%S")


@app.command()
def project(
    run_dir: Path | None = typer.Argument(
        None, help="A run directory written by run or bench (or give --validate)."
    ),
    nodes: str = typer.Option("1,2,4,8", "--nodes", help="Node counts to project, e.g. 1,2,4,8."),
    ranks_per_node: int | None = typer.Option(
        None, "--ranks-per-node", help="Ranks per node (default: the run's, or per GPU/NUMA)."
    ),
    hardware: str | None = typer.Option(
        None,
        "--hardware",
        help="Target: a64fx, xeon-8380, epyc-7763, v100, a100, h100 or FILE.toml "
        "(default: the machine of the run).",
    ),
    comm: Path | None = typer.Option(
        None, "--comm", help="α-β fits of `scalescope comm --json` for the allreduce."
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
    """Project step time, throughput and epoch time to more nodes or other hardware."""
    from scalescope.report.project_view import write_projection, write_validation

    if (run_dir is None) == (validate is None):
        fail("give a RUN_DIR to project, or --validate STUDY_DIR (not both)")
    try:
        if validate is not None:
            write_validation(validate, holdout, comm, algorithm, json_file)
            return
        from scalescope.predict.project import ProjectOptions

        options = ProjectOptions(
            nodes=int_list(nodes, "--nodes") or (), ranks_per_node=ranks_per_node,
            hardware=hardware,
            comm=comm, global_batch=global_batch, per_rank_batch=per_rank_batch,
            algorithm=algorithm, epoch_samples=epoch_samples, efficiency=efficiency,
        )  # fmt: skip
        written = write_projection(run_dir, options, json_file, html)
    except ValueError as exc:
        fail(str(exc))
    for path in written:
        err.print(f"wrote {path}")


@app.command()
def env(
    json_file: Path | None = typer.Option(None, "--json", help="Also write the facts as JSON."),
    nproc_per_node: int | None = typer.Option(
        None, "--nproc-per-node", "-n", help="Ranks per node you plan, for the thread checks."
    ),
) -> None:
    """Software build and hardware facts that decide speed, with a warning for each trap."""
    from scalescope.diagnose.env_checks import check_environment
    from scalescope.launch.facts import collect_environment
    from scalescope.report.env_view import env_json, render_env

    facts = collect_environment()
    warnings = check_environment(
        facts["software"], facts["hardware"], facts["threads"], nproc_per_node=nproc_per_node
    )
    render_env(facts, warnings, plain_console())
    if json_file is not None:
        json_file.write_bytes(env_json(facts, warnings))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
