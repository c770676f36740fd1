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


TUNE_DEFAULTS = {
    "nnodes": 1, "node_rank": 0, "rdzv_endpoint": None, "rdzv_backend": "c10d", "rdzv_id": "",
    "local_addr": None, "run_dir": None, "no_probe": False, "report_bindings": False,
}  # fmt: skip
"""Launch options tune does not take: trials run on this node, always under the probe."""


@app.command(context_settings=PASSTHROUGH)
def tune(
    ctx: typer.Context,
    script: str | None = typer.Argument(None, help="Training script (or module with -m)."),
    bench_model: str | None = typer.Option(
        None, "--bench", help="Tune the built-in bench workload of this model instead."
    ),
    nproc_per_node: int | None = NPROC,
    module: bool = typer.Option(False, "--module", "-m", help="SCRIPT is a module name."),
    space: list[str] | None = typer.Option(
        None, "--space", help="A knob and its values, NAME=V1,V2 (repeat); see docs/tune.md."
    ),
    trials: int = typer.Option(20, "--trials", help="Trials in the study, baseline included."),
    trial_seconds: float = typer.Option(
        60.0, "--trial-seconds", help="Time budget of one trial; then it is stopped."
    ),
    budget: float | None = typer.Option(
        None, "--budget", help="Minutes after which no new trial starts."
    ),
    sampler: str = typer.Option("tpe", "--sampler", help="tpe, gp, random or grid (exhaustive)."),
    no_prune: bool = typer.Option(False, "--no-prune", help="Never stop a slow trial early."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sampler."),
    resume: bool = typer.Option(False, "--resume", help="Continue the study in --run-dir."),
    warmup_steps: int = typer.Option(5, help="Steps of each trial left out of samples/s.", min=0),
    batch_size: int = typer.Option(32, help="--bench: images per rank per step.", min=1),
    image_size: int = typer.Option(224, help="--bench: height and width of the images.", min=8),
    trial_steps: int = typer.Option(200, help="--bench: steps of one trial.", min=2),
    master_addr: str | None = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    map_by: str = MAP_BY,
    threads_per_rank: int | None = THREADS,
    numa_nodes: str | None = NUMA_NODES,
    cpu_list: list[str] | None = CPU_LIST,
    oversubscribe: bool = OVERSUBSCRIBE,
    no_bind: bool = NO_BIND,
    bind_to: str = BIND_TO,
    allocator: str = ALLOCATOR,
    run_dir: Path | None = typer.Option(
        None, "--run-dir", help="The study's directory (default: scalescope_runs/tune-…)."
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write every trial as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Also write the study's HTML page."),
) -> None:
    """Search the knobs of SCRIPT [ARGS] (or --bench MODEL) by short real trials.

    The workload as given runs first (the baseline); the diagnosis of it proposes the next
    trials; then the sampler. Ctrl-C ends the study and still prints the table.
    """
    from scalescope.report.tune_view import TuneProgress, render_tune, tune_json
    from scalescope.tune.apply import default_study_dir, target_space
    from scalescope.tune.search import tune as run_study
    from scalescope.tune.study import TuneOptions

    params = locals() | TUNE_DEFAULTS
    target = tune_target(params, list(ctx.args))
    try:
        knobs = target_space(target, space)
        options = TuneOptions(
            trials=trials, budget_min=budget, trial_seconds=trial_seconds, sampler=sampler,
            prune=not no_prune, seed=seed, resume=resume,
        )  # fmt: skip
        study_dir = run_dir or default_study_dir(target)
        with TuneProgress(err, trial_seconds) as progress:
            result = run_study(target, knobs, options, study_dir, progress)
    except ValueError as exc:
        fail(escape(str(exc)))
    from scalescope.report.outputs import report_console

    render_tune(result, report_console())
    if json_file is not None:
        json_file.write_bytes(tune_json(result))
        err.print(f"wrote {json_file}")
    if html is not None:
        from scalescope.report.tune_html import render_tune_html

        html.write_text(render_tune_html(result), encoding="utf-8")
        err.print(f"wrote {html}")
    err.print(f"study: {study_dir}  (scalescope tune --resume --run-dir {study_dir} ...)")
    raise typer.Exit(130 if result.stopped == "interrupted" else 0)


def tune_target(p: dict[str, Any], args: list[str]):  # noqa: ANN201
    """The workload tune starts from: a script or module, or --bench MODEL."""
    from scalescope.bench.options import BenchOptions
    from scalescope.tune.apply import TuneTarget

    script, model = p["script"], p["bench_model"]
    if (script is None) == (model is None):
        fail("give a training script or --bench MODEL (one of them)")
    if script is not None and script.startswith("-"):
        fail(f"No such option: {escape(script)} (see scalescope tune --help)")
    if model is None:
        spec = launch_spec(
            p, target=script, is_module=p["module"], args=args, warmup_steps=p["warmup_steps"]
        )
        return TuneTarget(spec)
    if args:
        fail(f"--bench takes no script arguments, got {escape(' '.join(args))}")
    try:
        options = BenchOptions(
            model=model, batch_size=p["batch_size"], image_size=p["image_size"],
            steps=p["trial_steps"], warmup_steps=p["warmup_steps"],
        )  # fmt: skip
    except ValueError as exc:
        fail(escape(str(exc)))
    spec = launch_spec(
        p, target="scalescope.bench.workload", is_module=True, args=options.workload_args(),
        warmup_steps=p["warmup_steps"], workload=model, options=options.as_dict(),
    )  # fmt: skip
    return TuneTarget(spec, options)


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
