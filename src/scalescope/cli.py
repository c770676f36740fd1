"""Command line: parses, calls one stage entry point, renders. No logic of its own."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

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
err = Console(stderr=True, highlight=False, soft_wrap=True)

PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}

NPROC = typer.Option(
    None, "--nproc-per-node", "-n", help="Ranks to start on this node [default: 1].", min=1
)
MASTER_ADDR = typer.Option(None, "--master-addr", help="Address of rank 0 [default: 127.0.0.1].")
MASTER_PORT = typer.Option(None, "--master-port", help="Port of the rendezvous (default: free).")
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


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}")
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

            render_plan(dry_run(spec, given, p["master_addr"]), Console(highlight=False))
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
    run_dir: Path = typer.Argument(..., help="A run directory written by run or bench."),
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
    from scalescope.report.outputs import ReportFiles, report_run

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
    batch_size: int = typer.Option(32, help="Images per rank per step.", min=1),
    image_size: int = typer.Option(224, help="Height and width of the images.", min=8),
    steps: int | None = typer.Option(None, help="Steps to run (default 50).", min=1),
    epochs: int | None = typer.Option(None, help="Epochs to run instead of --steps.", min=1),
    warmup_steps: int = typer.Option(5, help="Steps left out of the statistics.", min=0),
    lr: float = typer.Option(0.01, help="SGD learning rate."),
    channels_last: bool = typer.Option(False, help="Use the channels_last memory format."),
    bf16: bool = typer.Option(False, help="bfloat16 autocast."),
    bucket_cap_mb: float = typer.Option(25.0, help="DDP bucket size (MB).", min=0.0),
    seed: int = typer.Option(0, help="Random seed."),
    data: Path | None = typer.Option(None, help="An ImageFolder (default: synthetic data)."),
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
            model=model, batch_size=batch_size, image_size=image_size, steps=steps,
            epochs=epochs, warmup_steps=warmup_steps, lr=lr, channels_last=channels_last,
            bf16=bf16, bucket_cap_mb=bucket_cap_mb, seed=seed, data=data, workers=workers,
            pin_memory=pin_memory,
        )  # fmt: skip
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


def parse_nodes(text: str) -> tuple[int, ...]:
    try:
        nodes = tuple(int(n) for n in text.split(","))
    except ValueError:
        fail(f"--nodes takes node counts like 1,2,4,8, got {escape(text)!r}")
        raise
    return nodes


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
            nodes=parse_nodes(nodes), ranks_per_node=ranks_per_node, hardware=hardware,
            comm=comm, global_batch=global_batch, per_rank_batch=per_rank_batch,
            algorithm=algorithm, epoch_samples=epoch_samples, efficiency=efficiency,
        )  # fmt: skip
        written = write_projection(run_dir, options, json_file, html)
    except ValueError as exc:
        fail(escape(str(exc)))
    for path in written:
        err.print(f"wrote {escape(str(path))}")


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
    render_env(facts, warnings, Console(highlight=False))
    if json_file is not None:
        json_file.write_bytes(env_json(facts, warnings))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
