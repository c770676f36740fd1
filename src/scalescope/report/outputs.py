"""Write the views of a loaded run: terminal, JSON, HTML dashboard, Chrome timeline."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from scalescope.analyze import RunAnalysis, analyze_run
from scalescope.events.run import Run, load_run

REPORT_WIDTH = 120
"""Width of the report when stdout is not a terminal (logs, pipes)."""


@dataclass(frozen=True)
class ReportFiles:
    json: Path | None = None
    html: Path | None = None
    timeline: Path | None = None
    steps: int | None = None
    """Steps in the timeline and the dashboard's timeline (default: a few after warm-up)."""


def report_console() -> Console:
    console = Console(highlight=False)
    return console if console.is_terminal else Console(highlight=False, width=REPORT_WIDTH)


def write_outputs(analysis: RunAnalysis, run: Run, files: ReportFiles) -> list[Path]:
    from scalescope.report.json_report import to_json

    written = []
    steps = None
    if files.steps is not None:
        from scalescope.report.timeline import default_steps

        steps = default_steps(run.events, run.meta.warmup_steps, files.steps)
    if files.json is not None:
        files.json.write_bytes(to_json(analysis))
        written.append(files.json)
    if files.html is not None:
        from scalescope.report.html import render_html

        files.html.write_text(render_html(analysis, run, steps), encoding="utf-8")
        written.append(files.html)
    if files.timeline is not None:
        from scalescope.report.timeline import chrome_trace, run_offsets, write_timeline

        write_timeline(files.timeline, chrome_trace(run, run_offsets(run), steps))
        written.append(files.timeline)
    return written


def report_run(run_dir: Path, files: ReportFiles, terminal: bool = True) -> list[Path]:
    """Analyse a run directory and write every view asked for."""
    from scalescope.report.terminal import render_terminal

    run = load_run(run_dir)
    analysis = analyze_run(run)
    if terminal:
        render_terminal(analysis, report_console())
    return write_outputs(analysis, run, files)


def compare_run_dirs(a_dir: Path, b_dir: Path, json_file: Path | None, html: Path | None) -> None:
    from scalescope.analyze.compare import compare_runs
    from scalescope.report.compare_view import comparison_json, render_comparison
    from scalescope.report.html import render_compare_html

    run_a, run_b = load_run(a_dir), load_run(b_dir)
    a, b = analyze_run(run_a), analyze_run(run_b)
    comparison = compare_runs(a, b)
    render_comparison(comparison, report_console())
    if json_file is not None:
        json_file.write_bytes(comparison_json(comparison))
    if html is not None:
        html.write_text(render_compare_html(a, run_a, b, run_b), encoding="utf-8")


def analyze_trace(path: Path, files: ReportFiles) -> list[Path]:
    """Ingest another tool's trace and give it the same views as a recorded run."""
    import msgspec

    from scalescope.ingest import ingest
    from scalescope.report.horovod_view import render_horovod_phases, render_ingest_source
    from scalescope.report.json_report import to_json
    from scalescope.report.terminal import render_terminal

    result = ingest(path)
    console = report_console()
    render_ingest_source(result, console)
    analysis = analyze_run(result.run)
    render_terminal(analysis, console)
    render_horovod_phases(result, console)
    written = write_outputs(analysis, result.run, replace(files, json=None))
    if files.json is not None:
        doc = msgspec.json.decode(to_json(analysis))
        doc["ingest"] = {
            "format": result.format,
            "files": [str(f) for f in result.files],
            "problems": list(result.problems),
            "horovod_phases": msgspec.to_builtins(result.horovod_phases),
            "horovod_waits": msgspec.to_builtins(result.horovod_waits),
        }
        files.json.write_bytes(msgspec.json.format(msgspec.json.encode(doc), indent=2))
        written.append(files.json)
    return written
