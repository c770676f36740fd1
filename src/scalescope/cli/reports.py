"""`report`, `analyze`, `compare`, `env`: render what was recorded or found."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import BASELINE, THRESHOLD, app, drive

RANKS = typer.Option(
    None,
    "--ranks",
    help="Ranks in the --timeline trace: N, A-B, worst:K, best:K or all, comma-separated "
    "(e.g. 0,worst:8,best:4,5-7; slowest by busy time per step). Default: every rank up to "
    "16 ranks, else 0,worst:8,best:4.",
)


@app.command()
def report(
    run_dir: Path = typer.Argument(
        ...,
        help="A run directory written by run or bench, a study directory of scale, or a suite "
        "directory of suite (or its suite.json).",
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the report as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Also write the HTML dashboard."),
    timeline: Path | None = typer.Option(
        None, "--timeline", help="Also write a Chrome/Perfetto trace of a few steps."
    ),
    steps: int | None = typer.Option(
        None, "--steps", help="Steps in the timelines (default: 10 after warm-up).", min=1
    ),
    ranks: str | None = RANKS,
    threshold: list[str] | None = THRESHOLD,
    baseline: Path | None = BASELINE,
) -> None:
    """Print where the time went in a recorded run; optionally write JSON, HTML, timeline.
    A scale study or a suite prints its table again."""
    from scalescope.commands import report as journey

    drive(journey.report, journey.ReportCommand(
        run_dir=run_dir, json_file=json_file, html=html, timeline=timeline, steps=steps,
        ranks=ranks, threshold=threshold, baseline=baseline,
    ))  # fmt: skip


@app.command()
def analyze(
    path: Path = typer.Argument(
        ..., help="A torch.profiler trace (file or per-rank directory) or a Horovod timeline."
    ),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the report as JSON."),
    html: Path | None = typer.Option(None, "--html", help="Also write the HTML dashboard."),
    timeline: Path | None = typer.Option(None, "--timeline", help="Also write a Chrome trace."),
    steps: int | None = typer.Option(None, "--steps", help="Steps in the timelines.", min=1),
    ranks: str | None = RANKS,
    threshold: list[str] | None = THRESHOLD,
    baseline: Path | None = BASELINE,
) -> None:
    """The same report for traces from other tools (torch.profiler/Kineto, Horovod)."""
    from scalescope.commands import report as journey

    drive(journey.analyze, journey.AnalyzeCommand(
        path=path, json_file=json_file, html=html, timeline=timeline, steps=steps, ranks=ranks,
        threshold=threshold, baseline=baseline,
    ))  # fmt: skip


@app.command()
def compare(
    run_a: Path = typer.Argument(..., help="The baseline run directory."),
    run_b: Path = typer.Argument(..., help="The run to compare with it."),
    json_file: Path | None = typer.Option(None, "--json", help="Also write the comparison."),
    html: Path | None = typer.Option(None, "--html", help="Also write a side-by-side dashboard."),
) -> None:
    """The same tables for two runs side by side, with ratios B / A."""
    from scalescope.commands import report as journey

    drive(journey.compare, journey.CompareCommand(
        run_a=run_a, run_b=run_b, json_file=json_file, html=html
    ))  # fmt: skip


@app.command()
def env(
    json_file: Path | None = typer.Option(None, "--json", help="Also write the facts as JSON."),
    nproc_per_node: int | None = typer.Option(
        None, "--nproc-per-node", "-n", help="Ranks per node you plan, for the thread checks."
    ),
) -> None:
    """Software build and hardware facts that decide speed, with a warning for each trap."""
    from scalescope.commands import env as journey

    drive(journey.env, journey.EnvCommand(json_file=json_file, nproc_per_node=nproc_per_node))
