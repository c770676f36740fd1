"""Command line: parses, calls one stage entry point, renders. No logic of its own."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from scalescope.launch.local import LaunchOptions
from scalescope.launch.runner import RunOutcome, RunSpec, execute

app = typer.Typer(
    help="Launch, profile and report on distributed PyTorch training.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)

REPORT_WIDTH = 120
"""Width of the report when stdout is not a terminal (logs, pipes)."""
PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}

NPROC = typer.Option(1, "--nproc-per-node", "-n", help="Ranks to start on this node.", min=1)
MASTER_ADDR = typer.Option("127.0.0.1", "--master-addr", help="Address of the rendezvous.")
MASTER_PORT = typer.Option(None, "--master-port", help="Port of the rendezvous (default: free).")
RUN_DIR = typer.Option(None, "--run-dir", help="Where to record (default: scalescope_runs/…).")
NO_PROBE = typer.Option(False, "--no-probe", help="Run without instrumentation (for A/B).")
NO_REPORT = typer.Option(False, "--no-report", help="Do not print the report at the end.")


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def finish(outcome: RunOutcome, show_report: bool) -> None:
    if show_report and outcome.meta.probe:
        print_report(outcome.run_dir)
    status = outcome.meta.status
    err.print(f"run {status}: {outcome.run_dir}  (scalescope report {outcome.run_dir})")
    raise typer.Exit(outcome.exit_code)


def print_report(run_dir: Path, json_file: Path | None = None) -> None:
    from scalescope.analyze.summary import analyze_run
    from scalescope.events.run import load_run
    from scalescope.report.json_report import to_json
    from scalescope.report.terminal import render_terminal

    analysis = analyze_run(load_run(run_dir))
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=REPORT_WIDTH)
    render_terminal(analysis, console)
    if json_file is not None:
        json_file.write_bytes(to_json(analysis))


def run_spec_or_fail(**kwargs) -> RunSpec:
    try:
        return RunSpec(**kwargs)
    except ValueError as exc:
        fail(str(exc))
        raise


@app.command(context_settings=PASSTHROUGH)
def run(
    ctx: typer.Context,
    script: str = typer.Argument(..., help="Training script (or module with -m)."),
    nproc_per_node: int = NPROC,
    module: bool = typer.Option(False, "--module", "-m", help="SCRIPT is a module name."),
    master_addr: str = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    run_dir: Path | None = RUN_DIR,
    no_probe: bool = NO_PROBE,
    warmup_steps: int = typer.Option(1, help="Steps left out of the statistics.", min=0),
    no_report: bool = NO_REPORT,
) -> None:
    """Start N ranks of SCRIPT [ARGS] under the probe and record a run directory.

    Arguments after SCRIPT go to the script: scalescope run -n 2 train.py --epochs 1
    """
    if script.startswith("-"):
        fail(f"No such option: {script} (see scalescope run --help)")
    try:
        launch = LaunchOptions(
            nproc_per_node=nproc_per_node, master_addr=master_addr, master_port=master_port
        )
    except ValueError as exc:
        fail(str(exc))
    spec = run_spec_or_fail(
        target=script,
        is_module=module,
        args=list(ctx.args),
        launch=launch,
        run_dir=run_dir,
        probe=not no_probe,
        warmup_steps=warmup_steps,
        command=["scalescope", *sys.argv[1:]],
    )
    finish(execute(spec), not no_report)


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="A run directory written by run or bench."),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the report as JSON."),
) -> None:
    """Print where the time went in a recorded run."""
    from scalescope.events.run import RunDirError

    try:
        print_report(run_dir, json_file)
    except RunDirError as exc:
        fail(str(exc))


@app.command()
def bench(
    model: str = typer.Argument(..., help="A torchvision classifier: resnet18, resnet50, ..."),
    nproc_per_node: int = NPROC,
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
        None, help="DataLoader workers (default 0 synthetic, 2).", min=0
    ),
    pin_memory: bool = typer.Option(False, help="Pin DataLoader memory."),
    master_addr: str = MASTER_ADDR,
    master_port: int | None = MASTER_PORT,
    run_dir: Path | None = RUN_DIR,
    no_probe: bool = NO_PROBE,
    no_report: bool = NO_REPORT,
) -> None:
    """Data-parallel training of a built-in torchvision model, profiled."""
    from scalescope.bench.options import BenchOptions

    try:
        options = BenchOptions(
            model=model,
            batch_size=batch_size,
            image_size=image_size,
            steps=steps,
            epochs=epochs,
            warmup_steps=warmup_steps,
            lr=lr,
            channels_last=channels_last,
            bf16=bf16,
            bucket_cap_mb=bucket_cap_mb,
            seed=seed,
            data=data,
            workers=workers,
            pin_memory=pin_memory,
        )
        launch = LaunchOptions(
            nproc_per_node=nproc_per_node, master_addr=master_addr, master_port=master_port
        )
    except ValueError as exc:
        fail(str(exc))
    spec = run_spec_or_fail(
        target="scalescope.bench.workload",
        is_module=True,
        args=options.workload_args(),
        launch=launch,
        run_dir=run_dir,
        probe=not no_probe,
        warmup_steps=warmup_steps,
        workload=model,
        options=options.as_dict(),
        command=["scalescope", *sys.argv[1:]],
    )
    finish(execute(spec), not no_report)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
