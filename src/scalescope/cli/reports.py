"""`report`, `analyze`, `compare`, `env`: render what was recorded or found."""

from __future__ import annotations

from pathlib import Path

import typer

from scalescope.cli.common import (
    BASELINE,
    THRESHOLD,
    app,
    diagnosis_thresholds,
    err,
    fail,
    plain_console,
)

RANKS = typer.Option(
    None,
    "--ranks",
    help="Ranks in the --timeline trace: N, A-B, worst:K, best:K or all, comma-separated "
    "(e.g. 0,worst:8,best:4,5-7; slowest by busy time per step). Default: every rank up to "
    "16 ranks, else 0,worst:8,best:4.",
)


def check_ranks(ranks: str | None, timeline: Path | None) -> None:
    """A ``--ranks`` value that cannot be read, or one without ``--timeline``, is a one-line
    error before anything is analysed."""
    from scalescope.report.rank_select import RankSpecError, parse_rank_spec

    if ranks is None:
        return
    if timeline is None:
        fail("--ranks selects the ranks of the --timeline trace: give --timeline FILE too")
    try:
        parse_rank_spec(ranks)
    except RankSpecError as exc:
        fail(str(exc))


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
    from scalescope.commands.report import ReportFiles, report_run
    from scalescope.events.files import SCALE_STUDY_FILE, SUITE_FILE
    from scalescope.events.run import RunDirError
    from scalescope.report.rank_select import RankSpecError

    check_ranks(ranks, timeline)
    if (run_dir / SCALE_STUDY_FILE).is_file():
        _report_study(run_dir, json_file, html, timeline)
        return
    if run_dir.is_file() or (run_dir / SUITE_FILE).is_file():
        _report_suite(run_dir, json_file or html or timeline)
        return
    files = ReportFiles(json=json_file, html=html, timeline=timeline, steps=steps, ranks=ranks)
    thresholds = diagnosis_thresholds(threshold, baseline)
    try:
        written = report_run(run_dir, files, thresholds=thresholds)
    except (RunDirError, RankSpecError) as exc:
        fail(str(exc))
    for path in written:
        err.print(f"wrote {path}")


def _report_study(
    study_dir: Path, json_file: Path | None, html: Path | None, timeline: Path | None
) -> None:
    from scalescope.commands.scale import report_study
    from scalescope.events.files import SCALE_STUDY_FILE
    from scalescope.report.formatting import report_console

    if json_file or timeline:
        fail(f"{study_dir} is a scale study: its JSON is {SCALE_STUDY_FILE}; no timeline")
    try:
        written = report_study(study_dir, html, report_console())
    except ValueError as exc:
        fail(str(exc))
    for path in written:
        err.print(f"wrote {path}")


def _report_suite(path: Path, other_output: Path | None) -> None:
    from scalescope.events.files import SUITE_FILE
    from scalescope.report.suite_view import load_suite, render_suite, suite_console

    if other_output:
        fail(f"{path} is a suite: its JSON is {SUITE_FILE}; no HTML or timeline")
    try:
        result = load_suite(path)
    except ValueError as exc:
        fail(str(exc))
    render_suite(result, suite_console())


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
    from scalescope.commands.report import ReportFiles, analyze_trace
    from scalescope.ingest import IngestError
    from scalescope.report.rank_select import RankSpecError

    check_ranks(ranks, timeline)
    files = ReportFiles(json=json_file, html=html, timeline=timeline, steps=steps, ranks=ranks)
    thresholds = diagnosis_thresholds(threshold, baseline)
    try:
        written = analyze_trace(path, files, thresholds, progress=err)
    except (IngestError, RankSpecError) as exc:
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
    from scalescope.commands.report import compare_run_dirs
    from scalescope.events.run import RunDirError

    try:
        compare_run_dirs(run_a, run_b, json_file, html)
    except RunDirError as exc:
        fail(str(exc))


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
